"""The layering of docs/architecture.md, checked on the source: flows only orchestrate and return typed
results, and nothing imports upwards (domain → tasks/flows, schemas → the rest)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
# a statement, as SQL is written in this project (upper-case keywords)
SQL = re.compile(r"\b(SELECT\b.*\bFROM|INSERT\s+(OR\s+\w+\s+)?INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|CREATE\s+(TABLE|VIEW))\b", re.S)


def _py(folder: str) -> list[Path]:
    return sorted(p for p in (ROOT / folder).rglob("*.py"))


def _imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
    return out


@pytest.mark.parametrize("path", _py("flows"), ids=lambda p: p.name)
def test_flows_hold_no_sql_and_return_typed_results(path: Path) -> None:
    tree = ast.parse(path.read_text("utf-8"))
    strings = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    assert not [s for s in strings if SQL.search(s)], path
    for fn in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
        if any(isinstance(d, ast.Call) and getattr(d.func, "id", "") == "flow" for d in fn.decorator_list):
            assert fn.returns is not None, f"{fn.name} has no return type"
            assert not ast.unparse(fn.returns).startswith("dict"), f"{fn.name} returns a dict"


DOMAIN = ["clonemem/generation", "clonemem/qa", "clonemem/memory", "clonemem/evaluation", "clonemem/llm",
          "clonemem/offline", "expectations", "warehouse", "schemas", "prompts"]


@pytest.mark.parametrize("path", [p for d in DOMAIN for p in _py(d)] + [
    ROOT / "clonemem" / f for f in ("cost.py", "stages.py", "runtime.py", "codehash.py",
                                     "errors.py", "ids.py", "registry.py", "text.py", "progress.py")],
    ids=lambda p: str(p.relative_to(ROOT)))
def test_nothing_imports_upwards(path: Path) -> None:
    upward = {m for m in _imports(path) if m.startswith(("clonemem.flows", "clonemem.tasks", "clonemem.cli",
                                                          "clonemem.demo"))}
    if path.name == "cost.py":  # the estimate is a dry run of the pipeline flow (an entry point of its own)
        upward -= {"clonemem.flows.pipeline", "clonemem.flows.gym"}  # and of the gym flow (`gym --estimate`)
    assert not upward, f"{path} imports {upward}"


@pytest.mark.parametrize("path", _py("schemas"), ids=lambda p: p.name)
def test_schemas_import_nothing_of_the_project_but_schemas(path: Path) -> None:
    project = {m for m in _imports(path) if m.startswith("clonemem")}
    # the generic registry, and the provider registry's names (config validation of `provider/model`)
    allowed = {"clonemem.registry", "clonemem.llm.registry", "clonemem.errors"}
    assert project <= allowed | {m for m in project if m.startswith("clonemem.schemas")}, path
