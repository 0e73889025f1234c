"""The recipes of docs/architecture.md, as written: each recipe's code block is written to a temporary
package, linted the way `make lint` lints the project (ruff with the project's rules, mypy with its
settings through tools/check_types.py) and run. A recipe that stops type-checking against the API it
teaches, or stops working, fails here."""

from __future__ import annotations

import datetime as dt
import importlib
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from clonemem.plugin import (
    BuildContext,
    GenerateRequest,
    ImportFailed,
    MemoryTrace,
    Message,
    QuestionView,
    RunConfig,
)

ROOT = Path(__file__).parent.parent
DOC = ROOT / "docs/architecture.md"
BLOCK = re.compile(r"^( *)```python\n(.*?)^\1```", re.S | re.M)
# recipe heading -> the module its code block becomes
RECIPES = {"Add a memory system": "newest", "Add a provider": "echo", "Add an importer": "diary"}


def recipe_blocks(heading: str) -> list[str]:
    """The python blocks of a recipe, in order (their indentation inside the list items removed)."""
    section = DOC.read_text("utf-8").split(f"### {heading}\n", 1)[1].split("\n### ", 1)[0]
    return [
        "".join(line.removeprefix(indent) for line in code.splitlines(keepends=True))
        for indent, code in BLOCK.findall(section)
    ]


def recipe_code(heading: str) -> str:
    """The one python block of a recipe."""
    blocks = recipe_blocks(heading)
    assert len(blocks) == 1, (
        f"docs/architecture.md, {heading!r}: {len(blocks)} python blocks, expected one"
    )
    return blocks[0]


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("recipes")
    pkg = root / "recipe_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text('"""The recipes of docs/architecture.md."""\n', "utf-8")
    for heading, module in RECIPES.items():
        (pkg / f"{module}.py").write_text(recipe_code(heading), "utf-8")
    sys.path.insert(0, str(root))
    try:
        yield pkg
    finally:
        sys.path.remove(str(root))
        for module in [m for m in sys.modules if m == "recipe_pkg" or m.startswith("recipe_pkg.")]:
            del sys.modules[module]


def load(module: str) -> ModuleType:
    return importlib.import_module(f"recipe_pkg.{module}")


def test_the_recipes_pass_ruff_and_mypy(package: Path) -> None:
    files = sorted(str(p) for p in package.glob("*.py"))
    ruff = subprocess.run(
        [
            sys.executable,
            "-m",
            "ruff",
            "check",
            "--no-cache",
            "--config",
            str(ROOT / "pyproject.toml"),
            *files,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert ruff.returncode == 0, ruff.stdout + ruff.stderr
    mypy = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "check_types.py"), "--only", *files],
        capture_output=True,
        text=True,
        check=False,
    )
    assert mypy.returncode == 0, mypy.stdout + mypy.stderr


def test_the_recipes_import_only_the_plugin_api(package: Path) -> None:
    imported = {
        m
        for p in package.glob("*.py")
        for m in re.findall(r"^from (clonemem\S*) import", p.read_text(), re.M)
    }
    assert imported == {"clonemem.plugin"}


def test_the_memory_system_recipe_retrieves_only_the_visible_past(package: Path) -> None:
    system = load("newest").Newest()
    day = dt.datetime(2024, 1, 1)
    traces = [
        MemoryTrace(f"t{i}", "diary", day + dt.timedelta(days=i), f"entry {i}") for i in range(5)
    ]
    ctx = BuildContext(llm=lambda stage, inp: inp)
    system.build(traces, ctx)
    got = system.retrieve(QuestionView("q", "what happened?", day + dt.timedelta(days=2)), 2)
    assert [r.trace_ids for r in got] == [("t2",), ("t1",)] and ctx.stats["items"] == 5
    assert [r.trace_ids for r in system.stored(day + dt.timedelta(days=1))] == [("t0",), ("t1",)]


def test_the_provider_recipe_answers_and_refuses(package: Path) -> None:
    api = load("echo").EchoAPI.from_config("any", RunConfig())
    request = GenerateRequest("s", "answerer", "", (Message("user", "hello there"),))
    assert (api.ref, api.generate(request).text, api.generate(request).input_tokens) == (
        "echo/any",
        "hello there",
        2,
    )
    with pytest.raises(Exception, match="without messages"):
        api.generate(GenerateRequest("s", "answerer", "", ()))


def test_the_importer_recipe_parses_and_lists_every_problem(package: Path) -> None:
    diary = load("diary").DiaryImporter()
    [persona] = diary.parse_text(
        "2024-01-02 I adopted a cat.\n2024-02-03 The cat sleeps.\n", "ann.txt"
    )
    assert (persona.release.person_id, [t.id for t in persona.release.context]) == (
        "ann",
        ["d1", "d2"],
    )
    with pytest.raises(ImportFailed) as failed:
        diary.parse_text("yesterday nothing\n2024-01-02 fine\nsoon more\n", "bob.txt")
    assert [str(p) for p in failed.value.problems] == [
        "bob.txt: line 1: not a date: 'yesterday'",
        "bob.txt: line 3: not a date: 'soon'",
    ]


def test_the_dashboard_page_recipe_passes_ruff_and_mypy(tmp_path: Path) -> None:
    """Its query appended to the real `queries.py` and its view added under `views/`, in a copy of the
    package's layout (the project's files stay untouched), both checked as `make lint` checks them."""
    from tools.check_types import mypy_only, namespace_tree

    query, view = recipe_blocks("Add a dashboard page")
    queries = (ROOT / "clonemem" / "dashboard" / "queries.py").read_text("utf-8") + "\n\n" + query
    tree = namespace_tree(
        tmp_path / "ns",
        {"dashboard/queries.py": queries, "dashboard/views/traces_by_medium.py": view},
    )
    files = [
        str(tree / "dashboard" / "queries.py"),
        str(tree / "dashboard" / "views" / "traces_by_medium.py"),
    ]
    ruff = subprocess.run(
        [
            sys.executable,
            "-m",
            "ruff",
            "check",
            "--no-cache",
            "--config",
            str(ROOT / "pyproject.toml"),
            *files,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert ruff.returncode == 0, ruff.stdout + ruff.stderr
    # the project's own cache, shared with `make lint`: a cache of its own began cold every fresh clone
    # (105 s against 9 s here, load 10 on 2 cores: the libraries' types, streamlit's above all)
    mypy = mypy_only(files, tree, ROOT / ".mypy_cache")
    assert mypy.returncode == 0, mypy.stdout + mypy.stderr
