"""The layering of docs/architecture.md, checked on the source: flows only orchestrate and return typed
results, and nothing imports upwards (the layers below the tasks never import tasks, flows or an entry
point). Which layer a module is in comes from the doc's layer table (tests/test_layers.py reads it)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.test_layers import FILES, LAYERS, Layer, layer_of, module_of, project_imports

ROOT = Path(__file__).parent.parent
# a statement, as SQL is written in this project (upper-case keywords)
SQL = re.compile(
    r"\b(SELECT\b.*\bFROM|INSERT\s+(OR\s+\w+\s+)?INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|CREATE\s+(TABLE|VIEW))\b",
    re.S,
)


def imports(path: Path) -> set[str]:
    """Every module ``path`` imports (the project's and others'), at any depth of the file."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
    return out


def flow_problems(source: str) -> list[str]:
    """SQL in a flow module, or a flow without a typed (non-dict) return."""
    tree = ast.parse(source)
    strings = [
        n for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    ]
    out = [f"line {n.lineno}: SQL" for n in strings if SQL.search(n.value)]
    for fn in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
        if any(
            getattr(d.func if isinstance(d, ast.Call) else d, "id", "") == "flow"
            for d in fn.decorator_list
        ):
            if fn.returns is None:
                out.append(f"{fn.name} has no return type")
            elif ast.unparse(fn.returns).startswith("dict"):
                out.append(f"{fn.name} returns a dict")
    return out


def test_flows_hold_no_sql_and_return_typed_results() -> None:
    flows = sorted((ROOT / "flows").rglob("*.py"))
    assert flows
    wrong = {
        str(p.relative_to(ROOT)): w for p in flows if (w := flow_problems(p.read_text("utf-8")))
    }
    assert not wrong, f"flows only orchestrate: {wrong}"


def lower_and_upper() -> tuple[set[str], set[str]]:
    """The layers below the tasks (what the tasks layer may import) and the others (tasks and above)."""
    tasks = next(layer for layer in LAYERS if layer.name == "tasks")
    return set(tasks.layers), {layer.name for layer in LAYERS} - set(tasks.layers)


def upward_imports(module: str, source: str) -> list[str]:
    mine: Layer | None = layer_of(module)
    lower, upper = lower_and_upper()
    if mine is None or mine.name not in lower:
        return []
    return [
        f"line {line}: {target}"
        for line, target in project_imports(source)
        if (theirs := layer_of(target)) is not None and theirs.name in upper
    ]


def test_nothing_imports_upwards() -> None:
    lower, upper = lower_and_upper()
    assert {"domain", "warehouse", "core", "schemas"} <= lower and {
        "entry",
        "orchestration",
        "tasks",
    } <= upper
    wrong = {
        str(p.relative_to(ROOT)): w
        for p in FILES
        if (w := upward_imports(module_of(p), p.read_text("utf-8")))
    }
    assert not wrong, f"imports of tasks, flows or entry points below the tasks layer: {wrong}"


def test_the_checks_see_sql_in_a_flow_and_an_upward_import(tmp_path: Path) -> None:
    source = (
        '@flow\ndef f(x: int) -> dict:\n    return {"n": "SELECT n FROM t"}\n\n'
        '@flow(name="g")\ndef g():\n    pass\n'
    )
    assert flow_problems(source) == ["line 3: SQL", "f returns a dict", "g has no return type"]
    source = "from clonemem.warehouse import Warehouse\nfrom clonemem.tasks.qa import plan\nimport clonemem.cli\n"
    assert upward_imports("clonemem.memory.toy", source) == [
        "line 2: clonemem.tasks.qa",
        "line 3: clonemem.cli",
    ]
    assert upward_imports("clonemem.flows.toy", source) == []  # orchestration may import tasks
