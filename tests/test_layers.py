"""The layer table of docs/architecture.md, enforced: every module of the project belongs to exactly one
layer of the table, and imports only its own layer and the layers (or modules) its row allows. The table
is the single source: change the doc and this check changes with it."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
DOC = ROOT / "docs" / "architecture.md"
# folders mapped into the `clonemem` namespace by pyproject.toml's package-dir
MAPPED = ("flows", "tasks", "schemas", "expectations", "warehouse", "prompts")
SOURCES = ("clonemem", *MAPPED, "benchmarks")
TICKED = re.compile(r"`([^`]+)`")


@dataclass(frozen=True)
class Layer:
    name: str
    paths: tuple[str, ...]  # files or folders (ending in /), relative to the repository
    layers: frozenset[str]  # the layers it may import
    modules: tuple[str, ...]  # single modules it may import besides


def read_layers(text: str) -> list[Layer]:
    section = text.split("## Layers and what each may import", 1)[1]
    rows = [line for line in section.splitlines() if line.startswith("|")][2:]  # after the header and rule
    cells = [[c.strip() for c in row.strip("|").split("|")] for row in rows]
    names = {c[0] for c in cells}
    layers = []
    for name, folders, may in cells:
        items = [i.strip() for i in may.split(",") if i.strip()]
        unknown = [i for i in items if not i.startswith("`") and i not in names]
        assert not unknown, f"docs/architecture.md: layer {name!r} may import unknown layers {unknown}"
        layers.append(Layer(name, tuple(TICKED.findall(folders)),
                            frozenset(i for i in items if not i.startswith("`")), tuple(TICKED.findall(may))))
    return layers


LAYERS = read_layers(DOC.read_text("utf-8"))


def module_of(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts if rel.parts[0] == "clonemem" or rel.parts[0] == "benchmarks" else ("clonemem", *rel.parts)
    return ".".join(p for p in parts if p != "__init__")


def path_key(module: str) -> str:
    """`clonemem.flows.qa` -> `flows/qa`; `clonemem.memory.base` -> `clonemem/memory/base`."""
    parts = module.split(".")
    if len(parts) > 1 and parts[0] == "clonemem" and parts[1] in MAPPED:
        parts = parts[1:]
    return "/".join(parts)


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


def project_imports(source: str) -> list[tuple[int, str]]:
    """(line, module) of every import of the project's own modules, at any depth of the file."""
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "clonemem"]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "clonemem":
            # `from clonemem import runtime` imports the module clonemem.runtime, `from clonemem.x import f` x
            out += [(node.lineno, f"{node.module}.{a.name}" if is_module(f"{node.module}.{a.name}") else node.module)
                    for a in node.names]
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
    assert {layer.name for layer in LAYERS} >= {"entry", "orchestration", "tasks", "domain", "warehouse", "core",
                                                "schemas"}


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_module_is_in_a_layer_and_imports_what_its_layer_may(path: Path) -> None:
    wrong = violations(module_of(path), path.read_text("utf-8"))
    assert not wrong, f"{path.relative_to(ROOT)} imports across the layers: " + "; ".join(wrong)


def test_the_check_fails_when_a_flow_imports_the_warehouse() -> None:
    source = "from clonemem.tasks.qa import plan\nfrom clonemem.warehouse import Warehouse\n"
    assert violations("clonemem.flows.toy", source) == ["line 2: clonemem.warehouse (warehouse)"]
    assert violations("clonemem.flows.toy", "from clonemem import runtime\n") == []
    assert violations("clonemem.schemas.toy", "from clonemem.memory import SYSTEMS\n")
