"""Results files through the command line: a stored run exported with `export-retrievals` and scored again
with `evaluate --retrievals` reproduces its metrics exactly; a bad file is one error line naming the file,
line and field or id, exit 1, and nothing stored; `--allow-missing` scores absent questions as retrieving
nothing."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clonemem.cli import app
from clonemem.warehouse import Warehouse
from tests.cli_kit import command_built_once  # noqa: F401  # a fixture

pytestmark = [pytest.mark.prefect, pytest.mark.usefixtures("command_built_once")]

runner = CliRunner()
EVAL_TABLES = (
    "eval_runs",
    "eval_retrievals",
    "eval_answers",
    "eval_judgments",
    "eval_question_scores",
    "eval_metrics",
    "eval_system_stats",
    "llm_calls",
)


def cli(wh: Path, *args: str):
    return runner.invoke(app, ["--warehouse", str(wh), *args])


def error_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("error:")]


def write_lines(path: Path, lines: list) -> Path:
    path.write_text(
        "".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines), "utf-8"
    )
    return path


def counts(wh: Path) -> dict[str, int]:
    with Warehouse.open_reader(wh) as db:
        return {t: db.rows(f"SELECT count(*) FROM {t}")[0][0] for t in EVAL_TABLES}


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory) -> tuple[Path, str]:
    """The demo release, evaluated with a note-taking system and a fact-extracting one (its items are judged)."""
    from clonemem.demo import fixture_files

    folder = tmp_path_factory.mktemp("results_file")
    wh = folder / "wh.duckdb"
    # through the CLI's import flow, which starts Prefect's own server: `evaluate` then uses it too,
    # while an `evaluate` first would start its early server, and the results-file scoring (which runs
    # outside it) a second one
    assert cli(wh, "import", "release", str(fixture_files()[0]), "--name", "X").exit_code == 0
    got = cli(
        wh,
        "evaluate",
        "X",
        "--systems",
        "amem,mem0",
        "--k",
        "3,5",
        "--force",
        "--json",
        str(folder / "r.json"),
    )
    assert got.exit_code == 0, got.output
    return wh, json.loads((folder / "r.json").read_text("utf-8"))["eval_run_id"]


def test_export_needs_a_system_and_k_when_the_run_has_several(
    evaluated: tuple[Path, str], tmp_path: Path
) -> None:
    wh, run_id = evaluated
    out = tmp_path / "r.jsonl"
    got = cli(wh, "export-retrievals", run_id, "--out", str(out), "--k", "3")
    assert (
        got.exit_code == 1
        and "scored several systems (amem, mem0): choose one with --system" in got.output
    )
    got = cli(wh, "export-retrievals", run_id, "--out", str(out), "--system", "mem0")
    assert got.exit_code == 1 and "scored several ks (3, 5): choose one with --k" in got.output
    got = cli(wh, "export-retrievals", run_id, "--out", str(out), "--system", "bm25", "--k", "3")
    assert got.exit_code == 1 and "has no system 'bm25' (it has: amem, mem0)" in got.output
    assert not out.exists()


@pytest.mark.parametrize(("system", "k", "kind"), [("amem", 3, "note"), ("mem0", 5, "fact")])
def test_export_and_rescore_reproduce_every_metric(
    evaluated: tuple[Path, str], tmp_path: Path, system: str, k: int, kind: str
) -> None:
    wh, run_id = evaluated
    out = tmp_path / f"{system}.jsonl"
    got = cli(wh, "export-retrievals", run_id, "--out", str(out), "--system", system, "--k", str(k))
    assert got.exit_code == 0, got.output
    lines = [json.loads(x) for x in out.read_text("utf-8").splitlines()]
    assert [x["question_id"] for x in lines] == ["q01", "q02", "q03", "q04", "q05", "q06"]
    assert all(len(x["items"]) <= 5 and all(i["kind"] == kind for i in x["items"]) for x in lines)
    assert {"choice", "answer", "written"} <= set(lines[0]) and "choice" not in lines[
        2
    ]  # q03 is free-text only

    name = f"my_{system}"
    got = cli(
        wh, "evaluate", "X", "--retrievals", str(out), "--name", name, "--k", str(k), "--force"
    )
    assert got.exit_code == 0, got.output
    assert f"sha256 {hashlib.sha256(out.read_bytes()).hexdigest()}" in got.output
    assert any(line.startswith(f"{name} ") for line in got.output.splitlines())
    with Warehouse.open_reader(wh) as db:

        def metrics(s: str) -> list[tuple]:
            return db.rows(
                "SELECT group_by, group_value, metric, n, value, ci_low, ci_high FROM eval_metrics "
                "WHERE system = ? AND k = ? ORDER BY ALL",
                [s, k],
            )

        def scores(s: str) -> list[tuple]:
            return db.rows(
                "SELECT * EXCLUDE (eval_run_id, system) FROM eval_question_scores "
                "WHERE system = ? AND k = ? ORDER BY question_id",
                [s, k],
            )

        assert metrics(name) == metrics(system) and len(metrics(system)) > 100
        assert scores(name) == scores(system)
        prov = json.loads(
            db.rows(
                "SELECT provenance_json::VARCHAR FROM eval_runs e WHERE EXISTS (SELECT 1 FROM "
                "eval_metrics m WHERE m.eval_run_id = e.eval_run_id AND m.system = ?)",
                [name],
            )[0][0]
        )
    (entry,) = [s for s in prov["systems"] if s["system"] == name]
    assert entry["extra"] == {
        "file": out.name,
        "sha256": hashlib.sha256(out.read_bytes()).hexdigest(),
    }

    # and the file's own run exports to the same file
    again = tmp_path / "again.jsonl"
    assert (
        cli(wh, "export-retrievals", "X", "--out", str(again)).exit_code == 0
    )  # the benchmark's latest run
    assert again.read_bytes() == out.read_bytes()


def _good_line(qid: str = "q01", trace: str = "t01") -> dict:
    return {"question_id": qid, "items": [{"trace_ids": [trace], "text": "a memory"}]}


BAD_FILES = {
    "not JSON": (
        ['{"question_id": "q01", "items": []}', '{"question_id": "q02", '],
        "line 2: not JSON",
    ),
    "missing items": ([{"question_id": "q01"}], "line 1: $.items: required field is missing"),
    "wrong type": (
        [{"question_id": "q01", "items": [{"trace_ids": "t01", "text": "x"}]}],
        "line 1: $.items[0].trace_ids: Input should be a valid list",
    ),
    "choice outside A-E": (
        [{**_good_line(), "choice": "F"}],
        "line 1: $.choice: Input should be 'A', 'B', 'C', 'D' or 'E'",
    ),
    "unknown question": ([_good_line(), _good_line("q99")], "line 2: unknown question id 'q99'"),
    "unknown trace": (
        [_good_line(), _good_line("q02", "t99")],
        "line 2: $.items[0].trace_ids[0]: unknown trace id 't99'",
    ),
    "repeated question": (
        [_good_line(), _good_line()],
        "line 2: question id 'q01' again (first on line 1)",
    ),
    "choice for a free-text item": (
        [{**_good_line("q03"), "choice": "A"}],
        "line 1: $.choice: question 'q03' has no choices",
    ),
    "missing questions": (
        [_good_line(), _good_line("q02")],
        "4 of the benchmark's 6 questions have no line (first: 'q03'); add them, or pass --allow-missing",
    ),
}


@pytest.mark.parametrize("case", BAD_FILES, ids=list(BAD_FILES))
def test_a_bad_file_is_one_line_naming_where_and_stores_nothing(
    evaluated: tuple[Path, str], tmp_path: Path, case: str
) -> None:
    wh, _ = evaluated
    lines, message = BAD_FILES[case]
    path = write_lines(tmp_path / "bad.jsonl", lines)
    before = counts(wh)
    got = cli(wh, "evaluate", "X", "--retrievals", str(path), "--name", "mine2", "--force")
    assert got.exit_code == 1, got.output
    assert error_lines(got.output) == [line for line in got.output.splitlines() if line.strip()], (
        got.output
    )
    [line] = error_lines(got.output)
    assert line.startswith(f"error: {path}: {message}"), line
    assert line.endswith("nothing was stored")
    assert counts(wh) == before


def test_usage_errors(evaluated: tuple[Path, str], tmp_path: Path) -> None:
    wh, _ = evaluated
    path = write_lines(tmp_path / "r.jsonl", [{**_good_line(), "choice": "A"}])
    got = cli(wh, "evaluate", "X", "--retrievals", str(path), "--name", "bm25", "--force")
    assert got.exit_code == 2 and "--name 'bm25' is a registered memory system" in got.output
    got = cli(wh, "evaluate", "X", "--retrievals", str(path), "--force")
    assert got.exit_code == 2 and "--retrievals FILE and --name NAME go together" in got.output
    got = cli(
        wh,
        "evaluate",
        "X",
        "--retrievals",
        str(path),
        "--name",
        "m",
        "--k",
        "1,2",
        "--allow-missing",
        "--force",
    )
    assert got.exit_code == 1 and "score it at one k (got --k 1,2)" in got.output
    got = cli(
        wh, "evaluate", "X", "--retrievals", str(tmp_path / "nope.jsonl"), "--name", "m", "--force"
    )
    assert (
        got.exit_code == 1
        and f"{tmp_path / 'nope.jsonl'}: cannot read the results file" in got.output
    )


def test_allow_missing_scores_absent_questions_as_retrieving_nothing(
    evaluated: tuple[Path, str], tmp_path: Path
) -> None:
    wh, _ = evaluated
    lines = [
        {
            "question_id": "q01",
            "items": [{"trace_ids": ["t01", "t02"], "text": "Lin works weekends."}],
        },
        {
            "question_id": "q02",
            "items": [{"trace_ids": ["t14"], "text": "Boundaries matter.", "kind": "trace"}],
            "choice": "B",
            "answer": "She sets boundaries now.",
        },
    ]
    path = write_lines(tmp_path / "partial.jsonl", lines)
    got = cli(wh, "evaluate", "X", "--retrievals", str(path), "--name", "partial", "--force")
    assert got.exit_code == 1 and "--allow-missing" in got.output
    got = cli(
        wh,
        "evaluate",
        "X",
        "--retrievals",
        str(path),
        "--name",
        "partial",
        "--allow-missing",
        "--force",
    )
    assert got.exit_code == 0, got.output
    assert (
        "scored as 'partial' at k=1: 2 lines; 4 questions without a line scored as retrieving nothing"
        in got.output
    )
    with Warehouse.open_reader(wh) as db:
        rows = dict(
            db.rows(
                "SELECT q.external_id, r.items::VARCHAR FROM eval_retrievals r JOIN questions q "
                "USING (question_id) WHERE r.system = 'partial'"
            )
        )
        answers = dict(
            db.rows(
                "SELECT q.external_id, {'choice': a.predicted_choice_id, 'answer': a.answer_text} "
                "FROM eval_answers a JOIN questions q USING (question_id) WHERE a.system = 'partial'"
            )
        )
        recall = dict(
            db.rows(
                "SELECT q.external_id, s.recall_any_any FROM eval_question_scores s "
                "JOIN questions q USING (question_id) WHERE s.system = 'partial'"
            )
        )
        diagnosis = db.rows(
            "SELECT count(*) FILTER (WHERE write_failure IS NULL), count(*) FROM eval_question_scores "
            "WHERE system = 'partial'"
        )[0]
        n = db.rows(
            "SELECT value FROM eval_metrics WHERE system = 'partial' AND group_by = 'all' "
            "AND metric = 'recall_flat'"
        )[0][0]
    assert len(rows) == 6 and all(json.loads(rows[q]) == [] for q in ("q03", "q04", "q05", "q06"))
    assert all(recall[q] == 0.0 for q in ("q03", "q04", "q05", "q06"))
    assert answers["q02"] == {"choice": "B", "answer": "She sets boundaries now."}
    assert (
        answers["q01"]["choice"] is not None
    )  # no choice given: the answerer chose from the items
    assert diagnosis == (
        6,
        6,
    )  # no line said whether its evidence was written: the write step is blank
    assert n is not None


def test_blank_names_are_refused_and_a_name_holding_another_files_results_needs_replace(
    evaluated: tuple[Path, str], tmp_path: Path
) -> None:
    """Issue 31, item 5: `--name "   "` stored a system named three spaces, `--name ""` got an unrelated
    line, and another file under a used name was stored as a second evaluation of the same system."""
    wh, _ = evaluated
    one = write_lines(tmp_path / "one.jsonl", [_good_line()])
    two = write_lines(tmp_path / "two.jsonl", [_good_line(trace="t02")])
    before = counts(wh)
    for blank, said in (
        ("   ", "--name: the name is blank ('   ': only whitespace)"),
        ("", "--name: the name is empty"),
        (" mine", "--name: the name has whitespace around it (' mine'): write it without"),
    ):
        got = cli(
            wh,
            "evaluate",
            "X",
            "--retrievals",
            str(one),
            "--name",
            blank,
            "--allow-missing",
            "--force",
        )
        assert got.exit_code == 2 and error_lines(got.output) == [f"error: {said}"], got.output
    assert counts(wh) == before
    assert (
        cli(
            wh,
            "evaluate",
            "X",
            "--retrievals",
            str(one),
            "--name",
            "reused",
            "--allow-missing",
            "--force",
        ).exit_code
        == 0
    )
    stored = counts(wh)
    got = cli(
        wh,
        "evaluate",
        "X",
        "--retrievals",
        str(two),
        "--name",
        "reused",
        "--allow-missing",
        "--force",
    )
    assert got.exit_code == 2, got.output
    [line] = error_lines(got.output)
    sha_one = hashlib.sha256(one.read_bytes()).hexdigest()
    assert line.startswith(
        f"error: --name 'reused' already names other results on benchmark 'X': file one.jsonl, "
        f"sha256 {sha_one[:12]}… (evaluation "
    ), line
    assert "not file two.jsonl" in line and line.endswith(
        "pass --replace to store these as its latest evaluation (the "
        "earlier one stays in its history), or give a new --name; "
        "nothing was stored"
    ), line
    assert counts(wh) == stored
    # the same file again is the same system; with --replace the other file is stored under the name
    assert (
        cli(
            wh,
            "evaluate",
            "X",
            "--retrievals",
            str(one),
            "--name",
            "reused",
            "--allow-missing",
            "--force",
        ).exit_code
        == 0
    )
    got = cli(
        wh,
        "evaluate",
        "X",
        "--retrievals",
        str(two),
        "--name",
        "reused",
        "--allow-missing",
        "--force",
        "--replace",
    )
    assert got.exit_code == 0, got.output
    with Warehouse.open_reader(wh) as db:
        latest = db.rows("SELECT provenance_json FROM eval_runs ORDER BY started_at DESC LIMIT 1")[
            0
        ][0]
    assert hashlib.sha256(two.read_bytes()).hexdigest() in latest
