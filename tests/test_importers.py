"""Importers as a registry: one module per format, one command path (the import flow), a recipe that
works for a format added in a test, and names that are refused when blank."""

from __future__ import annotations

import datetime as dt
import importlib
import json
import sys
from pathlib import Path
from typing import ClassVar

import pytest
from typer.testing import CliRunner

from clonemem.cli import app
from clonemem.importers import (
    IMPORTERS,
    Importer,
    ImportFailed,
    ParsedPersona,
    Problem,
    QuestionSource,
    importer,
)
from clonemem.importers.base import detect_language
from clonemem.registry import RegistryError
from clonemem.schemas.release import ReleaseEvidence, ReleaseFile, ReleaseQuestion, ReleaseTrace
from clonemem.warehouse import Warehouse
from tests.test_architecture import imports  # the one import scanner of the architecture tests

ROOT = Path(__file__).parent.parent
PUBLISHED = Path(__file__).parent / "fixtures" / "published"
MINI = Path(__file__).parent / "fixtures" / "locomo" / "conv-mini.json"


def cli(*args: object):
    return CliRunner().invoke(app, [str(a) for a in args])


def error_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.strip()]


# -- the toy format of the recipe (docs/architecture.md, "Add an importer") -----------------------


class ToyImporter(Importer):
    """A line-based diary: ``person ID NAME``, ``trace ID ISO-DATE TEXT``, ``ask ID ISO-DATE IDS | Q | A``."""

    name: ClassVar[str] = "toy"
    description: ClassVar[str] = "a toy line format (tests only)"
    source_format: ClassVar[str] = "toy"
    suffixes: ClassVar[tuple[str, ...]] = (".toy",)

    def parse_text(self, text: str, file: str) -> list[ParsedPersona]:
        person: tuple[str, str] | None = None
        traces: list[ReleaseTrace] = []
        asks: list[ReleaseQuestion] = []
        problems: list[Problem] = []
        for n, line in enumerate(text.splitlines(), start=1):
            kind, _, rest = line.partition(" ")
            try:
                if kind == "person":
                    key, _, who = rest.partition(" ")
                    person = (key, who)
                elif kind == "trace":
                    tid, when, content = rest.split(" ", 2)
                    traces.append(
                        ReleaseTrace(
                            id=tid,
                            medium="diary",
                            event_date=dt.datetime.fromisoformat(when),
                            content=content,
                        )
                    )
                elif kind == "ask":
                    head, question, answer = (part.strip() for part in rest.split("|"))
                    qid, when, ids = head.split(" ")
                    asks.append(
                        ReleaseQuestion(
                            id=qid,
                            question=question,
                            question_type="recall",
                            answer=answer,
                            dimension="experience",
                            question_time=dt.datetime.fromisoformat(when),
                            digital_trace_ids=ids.split(","),
                            evidence=[
                                ReleaseEvidence(
                                    statement=question, digital_trace_ids=ids.split(",")
                                )
                            ],
                        )
                    )
                elif line.strip():
                    problems.append(Problem(file, f"line {n}", f"unknown line kind {kind!r}"))
            except ValueError as exc:
                problems.append(Problem(file, f"line {n}", f"cannot read this line: {exc}"))
        if person is None:
            problems.append(Problem(file, "line 1", "no `person` line"))
        if problems:
            raise ImportFailed(problems)
        assert person is not None
        release = ReleaseFile(
            person_id=person[0], person_name=person[1], context=traces, questions=asks
        )
        # the toy's own type mapping: its one label is the project's single-point factual type
        sources = tuple(QuestionSource("single_point_factual") for _ in asks)
        return [
            ParsedPersona(
                file,
                release,
                detect_language(file, (t.content for t in traces)),
                self.source_format,
                sources=sources,
            )
        ]


TOY = """person T1 Toy Person
trace t1 2024-01-02T10:00:00 I adopted a cat and named her Miso.
trace t2 2024-02-03T09:00:00 Miso knocked the blue vase off the shelf.
ask q1 2024-03-01T00:00:00 t1,t2 | What is the name of my cat? | Miso
"""


def test_a_toy_format_registered_in_a_test_is_parsed_and_imported_through_the_cli(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "diaries"
    folder.mkdir()
    (folder / "t1.toy").write_text(TOY, "utf-8")
    (folder / "notes.json").write_text(
        "{}", "utf-8"
    )  # not a toy file: a folder gives the format's suffixes only
    wh = tmp_path / "wh.duckdb"
    with IMPORTERS.added("toy", ToyImporter):
        assert "toy" in IMPORTERS.names()
        (persona,) = importer("toy").parse_paths([folder])
        assert (persona.release.person_id, [t.id for t in persona.release.context]) == (
            "T1",
            ["t1", "t2"],
        )
        got = cli("--warehouse", wh, "import", "toy", folder, "--name", "toys")
        assert got.exit_code == 0, got.output
        assert "imported benchmark 'toys'" in got.output
        assert "this import: personas 1, traces 2, questions 1 (1 free-text only)" in got.output
        assert "recall -> single_point_factual ×1" in got.output
        bad = tmp_path / "bad.toy"
        bad.write_text("person T2 Someone\nwhisper something\n", "utf-8")
        got = cli("--warehouse", wh, "import", "toy", bad, "--name", "bad")
        assert got.exit_code == 1 and error_lines(got.output) == [
            f"error: {bad}: line 2: unknown line kind 'whisper'"
        ]
    assert "toy" not in IMPORTERS.names()
    with Warehouse.open_reader(wh) as r:
        assert r.rows("SELECT name, personas, traces, questions FROM v_benchmarks") == [
            ("toys", 1, 2, 1)
        ]
        assert r.rows("SELECT question_type, source_question_type FROM questions") == [
            ("single_point_factual", "recall")
        ]
        assert json.loads(r.scalar("SELECT config_json::VARCHAR FROM benchmarks"))["formats"] == [
            "toy"
        ]
    got = cli("--warehouse", wh, "import", "toy", folder, "--name", "again")
    assert got.exit_code == 1
    assert error_lines(got.output) == [
        f"error: unknown importer 'toy' (known: {', '.join(IMPORTERS.names())})"
    ]


def test_registry_add_and_remove_are_public() -> None:
    with pytest.raises(RegistryError, match="already registered"):
        with IMPORTERS.added("release", ToyImporter):
            pass
    assert IMPORTERS.get("release").__name__ == "ReleaseImporter"  # the refused name kept its entry
    IMPORTERS.add("toy2", ToyImporter)
    IMPORTERS.remove("toy2")
    with pytest.raises(RegistryError, match="unknown importer 'toy2'"):
        IMPORTERS.remove("toy2")


# -- one command path --------------------------------------------------------------------------


def test_import_format_and_the_old_commands_give_the_same_benchmark(tmp_path: Path) -> None:
    outputs = {}
    for i, command in enumerate((["import", "release"], ["import-release"])):
        wh = tmp_path / f"wh{i}.duckdb"
        got = cli("--warehouse", wh, *command, PUBLISHED / "100k", "--name", "X")
        assert got.exit_code == 0, got.output
        text = got.output.replace(str(wh), "WH").replace(f"wh{i}.duckdb", "WH")
        if command == ["import-release"]:  # the alias says it is one, then does the same
            first, text = text.split("\n", 1)
            assert (
                first
                == "note: `clonemem import-release` is deprecated; use `clonemem import release`"
            )
        outputs[tuple(command)] = text
        with Warehouse.open_reader(wh) as r:
            outputs[tuple(command) + ("rows",)] = r.rows(
                "SELECT question_id, question_type, answer FROM questions ORDER BY question_id"
            )
    assert outputs[("import", "release")] == outputs[("import-release",)]
    assert outputs[("import", "release", "rows")] == outputs[("import-release", "rows")]
    wh = tmp_path / "locomo.duckdb"
    got = cli("--warehouse", wh, "import", "locomo", MINI, "--name", "L")
    assert got.exit_code == 0 and "normalised ×2, split ×1, unresolved ×3" in got.output


def test_an_unknown_format_is_one_line_naming_the_known_ones(tmp_path: Path) -> None:
    got = cli("--warehouse", tmp_path / "wh.duckdb", "import", "relase", PUBLISHED, "--name", "X")
    assert got.exit_code == 1
    assert error_lines(got.output) == [
        "error: unknown importer 'relase'; did you mean 'release'? "
        f"(known: {', '.join(IMPORTERS.names())})"
    ]
    assert not (tmp_path / "wh.duckdb").exists()


# -- blank names (the trust issue) -----------------------------------------------------------------


@pytest.mark.parametrize("command", [["import", "release"], ["import", "locomo"]])
@pytest.mark.parametrize("name", ["", "   ", "\t"])
def test_an_empty_or_blank_name_is_refused(tmp_path: Path, command: list[str], name: str) -> None:
    path = MINI if "locomo" in "".join(command) else PUBLISHED / "100k"
    wh = tmp_path / "wh.duckdb"
    got = cli("--warehouse", wh, *command, path, "--name", name)
    assert got.exit_code == 2
    [line] = error_lines(got.output)
    assert line == (
        "error: --name: the name is empty"
        if not name
        else f"error: --name: the name is blank ({name!r}: only whitespace)"
    ), line
    assert not wh.exists()


def test_the_import_flow_refuses_a_blank_name_too(tmp_path: Path) -> None:
    """A deployment's run is refused as the CLI is, before any file is read."""
    from clonemem.flows.imports import import_flow

    with pytest.raises(ImportFailed, match="benchmark name: must not be empty or blank"):
        import_flow("release", [str(PUBLISHED / "100k")], " ", str(tmp_path / "wh.duckdb"))
    assert not (tmp_path / "wh.duckdb").exists()


# -- homes and layers ------------------------------------------------------------------------------


def test_the_release_schema_carries_no_locomo_fields() -> None:
    assert not {"locomo_category", "adversarial_answer"} & set(ReleaseQuestion.model_fields)


@pytest.mark.parametrize(
    "path",
    sorted(
        [
            *(ROOT / "clonemem" / "importers").glob("*.py"),
            *(ROOT / "clonemem" / "exporters").glob("*.py"),
        ]
    ),
    ids=lambda p: f"{p.parent.name}/{p.name}",
)
def test_importers_and_exporters_are_domain_modules(path: Path) -> None:
    upward = {
        m
        for m in imports(path)
        if m.startswith(
            ("clonemem.flows", "clonemem.tasks", "clonemem.cli", "clonemem.demo", "prefect")
        )
    }
    assert not upward, f"{path} imports {upward}"


def test_the_import_flow_imports_only_tasks_and_schemas() -> None:
    for name in ("imports.py",):
        project = {m for m in imports(ROOT / "flows" / name) if m.startswith("clonemem")}
        assert all(
            m.startswith(("clonemem.tasks", "clonemem.schemas", "clonemem.flows")) for m in project
        ), project


# -- the parse cache follows the importer's code ---------------------------------------------------

TOY_MODULE = """
from clonemem.importers.release import ReleaseImporter


class Copy(ReleaseImporter):
    name = "release_copy"
"""


def _fresh() -> None:
    from clonemem.codehash import _code_hash, closure

    _code_hash.cache_clear()
    closure.cache_clear()
    importlib.invalidate_caches()


@pytest.mark.prefect
def test_editing_an_importer_parses_its_files_again(tmp_path: Path, demo_file: Path) -> None:
    from prefect import flow

    from clonemem.tasks.imports import parse_file

    pkg = tmp_path / "toyformat"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "fmt.py").write_text(TOY_MODULE)
    sys.path.insert(0, str(tmp_path))
    _fresh()
    data = demo_file.read_bytes()

    @flow
    def parse_once() -> str:
        return parse_file("release_copy", data, str(tmp_path / "demo.json"), return_state=True).name

    try:
        module = importlib.import_module("toyformat.fmt")
        with IMPORTERS.added("release_copy", module.Copy):
            assert parse_once() == "Completed"
            assert parse_once() == "Cached"
            (pkg / "fmt.py").write_text(TOY_MODULE + "\n# a change to the importer's code\n")
            _fresh()
            assert parse_once() == "Completed"
            assert parse_once() == "Cached"
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("toyformat.fmt", None)
        sys.modules.pop("toyformat", None)
        _fresh()
