"""The layer table of docs/architecture.md, enforced: every module of the project belongs to exactly one
layer of the table, and imports only its own layer and the layers (or modules) its row allows. The table
is the single source: change the doc and this check changes with it."""

from __future__ import annotations

import ast
import functools
import re
import sys
import tomllib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from clonemem import layout

ROOT = Path(__file__).parent.parent
DOC = ROOT / "docs/architecture.md"
SOURCES = (*layout.SOURCES, "benchmarks")
TICKED = re.compile(r"`([^`]+)`")


@dataclass(frozen=True)
class Layer:
    name: str
    paths: tuple[str, ...]  # files or folders (ending in /), relative to the repository
    layers: frozenset[str]  # the layers it may import
    modules: tuple[str, ...]  # single modules it may import besides


def read_layers(text: str) -> list[Layer]:
    section = text.split("## Layers and what each may import", 1)[1]
    rows = [line for line in section.splitlines() if line.startswith("|")][
        2:
    ]  # after the header and rule
    cells = [[c.strip() for c in row.strip("|").split("|")] for row in rows]
    names = {c[0] for c in cells}
    layers = []
    for name, folders, may in cells:
        items = [i.strip() for i in may.split(",") if i.strip()]
        unknown = [i for i in items if not i.startswith("`") and i not in names]
        assert not unknown, (
            f"docs/architecture.md: layer {name!r} may import unknown layers {unknown}"
        )
        layers.append(
            Layer(
                name,
                tuple(TICKED.findall(folders)),
                frozenset(i for i in items if not i.startswith("`")),
                tuple(TICKED.findall(may)),
            )
        )
    return layers


LAYERS = read_layers(DOC.read_text("utf-8"))


def module_of(path: Path) -> str:
    return layout.module_name(path.relative_to(ROOT))


path_key = layout.repo_path


def layer_of(module: str) -> Layer | None:
    key = path_key(module)
    best: tuple[int, Layer] | None = None
    for layer in LAYERS:
        for p in layer.paths:
            stem = p.removesuffix(".py").rstrip("/")
            if stem.endswith("/__init__"):  # the package module itself, not what is below it
                stem = stem.removesuffix("/__init__")
                if key != stem:
                    continue
            if key == stem or key.startswith(stem + "/"):
                if best is None or len(stem) > best[0]:
                    best = (len(stem), layer)
    return best[1] if best else None


def is_module(module: str) -> bool:
    key = ROOT / path_key(module)
    return key.with_suffix(".py").is_file() or key.is_dir()


@functools.cache
def parsed(source: str) -> ast.Module:
    """A file's tree, parsed once for all the checks here (each only reads it)."""
    return ast.parse(source)


def project_imports(source: str) -> list[tuple[int, str]]:
    """(line, module) of every import of the project's own modules, at any depth of the file."""
    return _project_imports(ast.walk(parsed(source)))


def _project_imports(nodes: Iterable[ast.AST]) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    for node in nodes:
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "clonemem"]
        elif (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.module.split(".")[0] == "clonemem"
        ):
            # `from clonemem import runtime` imports the module clonemem.runtime, `from clonemem.x import f` x
            out += [
                (
                    node.lineno,
                    f"{node.module}.{a.name}"
                    if is_module(f"{node.module}.{a.name}")
                    else node.module,
                )
                for a in node.names
            ]
    return sorted(set(out))


def violations(module: str, source: str) -> list[str]:
    mine = layer_of(module)
    assert mine is not None, f"{module} is in no layer of docs/architecture.md"
    wrong = []
    for line, target in project_imports(source):
        theirs = layer_of(target)
        if theirs is None or theirs.name == mine.name or theirs.name in mine.layers:
            continue
        if not any(target == m or target.startswith(m + ".") for m in mine.modules):
            wrong.append(f"line {line}: {target} ({theirs.name})")
    return wrong


FILES = sorted(p for d in SOURCES for p in (ROOT / d).rglob("*.py"))


def test_the_doc_has_the_layer_table() -> None:
    assert {layer.name for layer in LAYERS} >= {
        "entry",
        "orchestration",
        "tasks",
        "domain",
        "warehouse",
        "core",
        "schemas",
    }


def test_every_module_is_in_a_layer_and_imports_what_its_layer_may() -> None:
    outside = [str(p.relative_to(ROOT)) for p in FILES if layer_of(module_of(p)) is None]
    assert not outside, f"modules in no layer of docs/architecture.md: {outside}"
    wrong = {
        str(p.relative_to(ROOT)): w
        for p in FILES
        if (w := violations(module_of(p), p.read_text("utf-8")))
    }
    assert not wrong, f"imports across the layers: {wrong}"


def test_the_check_fails_when_a_flow_imports_the_warehouse() -> None:
    source = "from clonemem.tasks.qa import plan\nfrom clonemem.warehouse import Warehouse\n"
    assert violations("clonemem.flows.toy", source) == ["line 2: clonemem.warehouse (warehouse)"]
    assert violations("clonemem.flows.toy", "from clonemem import runtime\n") == []
    assert violations("clonemem.schemas.toy", "from clonemem.memory import SYSTEMS\n")


# -- one name per module ---------------------------------------------------------------------------


def test_the_mapped_folders_are_those_pyproject_installs() -> None:
    package_dir = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["tool"]["setuptools"][
        "package-dir"
    ]
    assert package_dir == {
        layout.PACKAGE: layout.PACKAGE,
        **{f"{layout.PACKAGE}.{m}": m for m in layout.MAPPED},
    }


def second_names(path: Path, test_modules: frozenset[str]) -> list[str]:
    """Imports that name a module by a second name: a mapped folder as a top-level package (`flows.qa`
    for `clonemem.flows.qa`) or a module of tests/ without `tests.` (`dashboard_kit`)."""
    wrong = []
    for node in ast.walk(parsed(path.read_text("utf-8"))):
        names = (
            [a.name for a in node.names]
            if isinstance(node, ast.Import)
            else [node.module]
            if isinstance(node, ast.ImportFrom) and node.module and not node.level
            else []
        )
        wrong += [
            f"line {node.lineno}: {n}"
            for n in names
            if n.split(".")[0] in layout.MAPPED or n.split(".")[0] in test_modules
        ]
    return wrong


def test_no_module_is_imported_under_a_second_name() -> None:
    """One module object per file: the product's folders only as `clonemem.*`, the tests' helpers only
    as `tests.*` (pytest imports test files as `tests.test_x`: pyproject's import mode)."""
    test_modules = frozenset(p.stem for p in (ROOT / "tests").glob("*.py"))
    scanned = [
        *FILES,
        *sorted((ROOT / "tests").glob("*.py")),
        *sorted((ROOT / "tools").glob("*.py")),
        *sorted((ROOT / "examples").rglob("*.py")),
    ]
    wrong = {str(p.relative_to(ROOT)): w for p in scanned if (w := second_names(p, test_modules))}
    assert not wrong, f"imports under a second name (use clonemem.* / tests.*): {wrong}"


def test_the_check_sees_a_second_name(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "import flows.qa\nfrom schemas.config import RunConfig\nfrom dashboard_kit import app\n"
        "from clonemem.flows import qa\nfrom tests.dashboard_kit import app\n",
        "utf-8",
    )
    assert second_names(module, frozenset({"dashboard_kit"})) == [
        "line 1: flows.qa",
        "line 2: schemas.config",
        "line 3: dashboard_kit",
    ]


def test_test_files_have_one_name() -> None:
    assert __name__ == "tests.test_layers"
    assert "conftest" not in sys.modules and "tests.conftest" in sys.modules


# -- no circles, no private imports ------------------------------------------------------------------


def _type_checking_only(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and ast.unparse(node.test) in (
        "TYPE_CHECKING",
        "typing.TYPE_CHECKING",
    )


def runtime_imports(source: str) -> set[str]:
    """The project modules ``source`` imports when it runs (at any depth; not `if TYPE_CHECKING:` blocks)."""
    return {target for _, target in _project_imports(_runtime_nodes(parsed(source)))}


def _runtime_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node of ``tree`` but those inside the body of an `if TYPE_CHECKING:` (its test and its
    `else:` run)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        if _type_checking_only(node):
            assert isinstance(node, ast.If)
            todo += [node.test, *node.orelse]
        else:
            todo.extend(ast.iter_child_nodes(node))


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every group of modules that import each other, directly or through others (strongly connected
    components of more than one module, or a module importing itself), each sorted."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        order[v] = low[v] = len(order)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in graph:
                continue
            if w not in order:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], order[w])
        if low[v] == order[v]:
            group = stack[stack.index(v) :]
            del stack[stack.index(v) :]
            if len(group) > 1 or v in graph[v]:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in order:
            visit(v)
    return sorted(found)


def private_imports(source: str) -> list[str]:
    """`from clonemem.x import _name`: a module reaching into another's private names."""
    return [
        f"line {n.lineno}: {n.module}.{a.name}"
        for n in ast.walk(parsed(source))
        if isinstance(n, ast.ImportFrom) and n.module and n.module.split(".")[0] == "clonemem"
        for a in n.names
        if a.name.startswith("_") and not a.name.startswith("__")
    ]


def test_the_import_graph_has_no_circle() -> None:
    graph = {module_of(p): runtime_imports(p.read_text("utf-8")) for p in FILES}
    assert circles(graph) == []


def test_no_module_imports_another_modules_private_names() -> None:
    wrong = {
        str(p.relative_to(ROOT)): w for p in FILES if (w := private_imports(p.read_text("utf-8")))
    }
    assert not wrong, (
        f"private names imported across modules (make them public where they belong): {wrong}"
    )


def test_the_checks_see_a_circle_and_a_private_import() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}) == [
        ["a", "b", "c"],
        ["e"],
    ]
    lazy = "def f():\n    from clonemem.qa.privacy import run\n"
    typing_only = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from clonemem.qa.privacy import run\n"
    assert (
        runtime_imports(lazy) == {"clonemem.qa.privacy"} and runtime_imports(typing_only) == set()
    )
    assert private_imports(
        "from clonemem.tasks.generation import _transient_only, cached_stage\n"
    ) == ["line 1: clonemem.tasks.generation._transient_only"]
