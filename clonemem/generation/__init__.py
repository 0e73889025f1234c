"""Generation stages I–III: stage definitions, the persona DAG, and assembly into warehouse rows."""
