"""Exporters: a benchmark in the warehouse written out in a published format."""
