"""Stage IV and the Great Expectations gate on a small offline benchmark."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest

from clonemem import text as textutil
from clonemem.exporters.release import export_release
from clonemem.importers import import_files
from clonemem.offline import OfflineCall
from clonemem.offline.world.qa import check_choice
from clonemem.qa.pipeline import CONFIDENT
from clonemem.schemas.config import DIMENSIONS, RunConfig
from clonemem.schemas.qa import E_TEXT, Choice, ChoiceInput
from clonemem.schemas.question_types import names as question_type_names
from clonemem.warehouse import Warehouse

pytestmark = pytest.mark.prefect

CONFIG = {
    "name": "qa-bench",
    "seed": 5,
    "generation": {
        "major_events": 4,
        "phases_per_event": 2,
        "events_per_phase": 4,
        "traces_per_event": 3,
        "noise_traces_per_phase": 2,
    },
    "qa": {"types_per_segment": 4},
}


@pytest.fixture(scope="module")
def bench(tmp_path_factory) -> Path:
    from clonemem.flows.pipeline import pipeline_flow

    path = tmp_path_factory.mktemp("qa") / "wh.duckdb"
    cfg = RunConfig.model_validate(CONFIG)
    assert pipeline_flow(str(path), cfg, evaluate=False).gate_status == "passed"
    return path


def rows(path: Path, sql: str) -> list[tuple]:
    with Warehouse.open_reader(path) as wh:
        return wh.rows(sql)


def test_questions_cover_types_and_dimensions(bench: Path) -> None:
    types = {r[0] for r in rows(bench, "SELECT DISTINCT question_type FROM questions")}
    dims = {r[0] for r in rows(bench, "SELECT DISTINCT dimension FROM questions")}
    assert types == set(question_type_names()) and dims == set(DIMENSIONS)
    assert rows(bench, "SELECT gate_status FROM benchmarks")[0][0] == "passed"


def test_multiple_choice_items(bench: Path) -> None:
    for _qid, qtype, correct, choices in rows(
        bench,
        "SELECT q.question_id, q.question_type, q.correct_choice_id, "
        "list(c.choice_id || ':' || c.text ORDER BY c.seq) FROM questions q "
        "JOIN question_choices c USING (question_id) GROUP BY ALL",
    ):
        assert [c.split(":", 1)[0] for c in choices] == list("ABCDE")
        assert choices[-1] == f"E:{E_TEXT}"
        assert len({c.split(":", 1)[1] for c in choices}) == 5
        assert (correct == "E") == (qtype == "unanswerable")


def test_answers_follow_from_their_evidence(bench: Path) -> None:
    items = rows(
        bench,
        "SELECT q.question_id, q.answer, list(e.statement) FROM questions q JOIN question_evidence qe USING (question_id) "
        "JOIN evidence e USING (evidence_id) WHERE q.question_type <> 'unanswerable' "
        # a privacy task's reference response withholds its sensitive items (tests/test_privacy.py)
        "AND q.question_type NOT IN ('contextual_disclosure', 'boundary_defense') GROUP BY ALL",
    )
    assert items
    for _qid, answer, statements in items:
        ev = set(textutil.content_words(" ".join(statements)))
        words = [
            w
            for w in textutil.content_words(answer)
            if w
            not in (
                "back",
                "started",
                "then",
                "keeps",
                "coming",
                "again",
                "later",
                "goes",
                "putting",
                "together",
            )
        ]
        assert sum(w in ev for w in words) / len(words) >= 0.6, answer


def test_quality_control_is_recorded_and_really_rejects(bench: Path) -> None:
    stages = dict(rows(bench, "SELECT stage, count(*) FROM qa_rejected GROUP BY stage"))
    assert stages.get("sufficiency", 0) >= 1  # embellished answers were caught
    repaired = rows(
        bench,
        "SELECT count(*) FROM questions q WHERE EXISTS (SELECT 1 FROM qa_distractor_rounds r "
        "WHERE r.question_id = q.question_id AND r.round = 1 AND NOT r.passed)",
    )[0][0]
    assert repaired >= 1  # some items failed a first round and were repaired
    assert (
        rows(bench, "SELECT count(*) FROM qa_checks WHERE check_name = 'distractor_blind'")[0][0]
        >= 10
    )
    assert rows(bench, "SELECT count(*) FROM trajectory_segments")[0][0] >= 5
    # every question traces back to its segment and window
    orphans = rows(
        bench,
        "SELECT count(*) FROM questions q LEFT JOIN trajectory_segments s USING (segment_id) "
        "WHERE s.segment_id IS NULL",
    )[0][0]
    assert orphans == 0


def test_validator_catches_cues_and_single_evidence_answers() -> None:
    import random

    def attempt(mode: str, texts: list[str], evidence: str | None = None) -> str:
        choices = [Choice(id=c, text=t) for c, t in zip("ABCD", texts)] + [
            Choice(id="E", text=E_TEXT)
        ]
        inp = ChoiceInput(
            question="How did your job change since March?",
            choices=choices,
            mode=mode,
            evidence=evidence,
            language="en",
        )
        got = check_choice(OfflineCall("qa.distractor_check", inp, random.Random(1), "validator"))
        return got.choice_id if got.confidence >= CONFIDENT else "?"

    short = ["I moved flats.", "I took up running.", "I sang in a choir."]
    long = "I stayed late at Halden to finish the audit, then asked Daniel for a lighter load and applied elsewhere."
    assert attempt("blind", [short[0], long, short[1], short[2]]) == "B"
    balanced = [
        "I moved to a flat near the river and spent the spring unpacking boxes with Wei.",
        "I started physiotherapy twice a week and walked the river path without pain by June.",
        long,
        "I joined the sketch club on Saturdays and helped two newcomers at their first session.",
    ]
    assert attempt("blind", balanced) == "?"
    assert (
        attempt("single_evidence", balanced, "Lin stayed late at Halden to finish the audit.")
        == "C"
    )


def break_copy(src: Path, dst: Path, statements: list[str]) -> Path:
    shutil.copy(src, dst)
    con = duckdb.connect(str(dst))
    for sql in statements:
        con.execute(sql)
    con.close()
    return dst


def test_gate_catches_broken_data(bench: Path, tmp_path: Path) -> None:
    from clonemem.expectations.gate import run_gate

    q = [
        r[0]
        for r in rows(
            bench,
            "SELECT question_id FROM questions WHERE question_type <> 'unanswerable' ORDER BY seq",
        )
    ]
    broken = break_copy(
        bench,
        tmp_path / "broken.duckdb",
        [
            # an evidence pointing at a missing trace
            "UPDATE evidence_traces SET trace_id = 'missing-trace' WHERE evidence_id = "
            f"(SELECT evidence_id FROM question_evidence WHERE question_id = '{q[0]}' ORDER BY seq LIMIT 1) AND seq = 0",
            # a duplicated option
            f"UPDATE question_choices SET text = (SELECT text FROM question_choices WHERE question_id = '{q[1]}' "
            f"AND choice_id = 'A') WHERE question_id = '{q[1]}' AND choice_id = 'B'",
            # an answer its evidence does not support (edited after validation)
            f"UPDATE questions SET answer = answer || ' I also won the lottery that spring.' WHERE question_id = '{q[2]}'",
            # a distractor that is a copy of the answer
            f"UPDATE question_choices SET text = (SELECT answer FROM questions WHERE question_id = '{q[3]}') "
            f"WHERE question_id = '{q[3]}' AND choice_id = (SELECT CASE WHEN correct_choice_id = 'A' THEN 'B' ELSE 'A' END "
            f"FROM questions WHERE question_id = '{q[3]}')",
            # a multi-point item left with one evidence item (its type's spec asks for two)
            "DELETE FROM question_evidence WHERE seq > 0 AND question_id = (SELECT question_id FROM questions "
            "WHERE question_type = 'comparison' ORDER BY seq LIMIT 1)",
        ],
    )
    result = run_gate(broken, "qa-bench", docs_dir=tmp_path / "docs")
    assert result.status == "failed"
    failed = {o.expectation: o for o in result.failed}
    assert set(failed) == {
        "every evidence trace id exists",
        "five distinct options, one correct, E as specified",
        "every accepted item passed the sufficiency check",
        "no distractor copies the answer",
        # a link to a missing trace is also a link to a trace that does not carry the evidence
        "traces referenced by evidence carry it",
        "every accepted item cites its type's minimum evidence",
    }
    assert failed["every evidence trace id exists"].failing_sample[0]["trace_id"] == "missing-trace"
    assert {
        r["question_id"]
        for r in failed["five distinct options, one correct, E as specified"].failing_sample
    } == {q[1], q[3]}
    assert (
        failed["every accepted item passed the sufficiency check"].failing_sample[0]["question_id"]
        == q[2]
    )
    assert failed["no distractor copies the answer"].failing_sample[0]["question_id"] == q[3]
    with Warehouse.open_reader(broken) as wh:
        assert wh.scalar("SELECT gate_status FROM benchmarks") == "failed"
        stored = wh.rows(
            "SELECT expectation, success, unexpected_count FROM gate_results WHERE NOT success"
        )
        assert {r[0] for r in stored} == set(failed)
    assert result.data_docs and Path(result.data_docs).exists()


def test_gate_on_an_imported_release(tmp_path: Path, demo_file: Path) -> None:
    from clonemem.expectations.docs_views import COMPILED
    from clonemem.expectations.gate import run_gate

    wh_path = tmp_path / "imp.duckdb"
    with Warehouse.open_writer(wh_path) as wh:
        import_files(wh, "release", [demo_file], "imported")
    ok = run_gate(wh_path, "imported", docs_dir=tmp_path / "docs")
    assert ok.status == "passed"
    compiled = COMPILED.compiled  # the Data Docs templates, compiled once per process
    assert compiled > 0
    assert all(
        o.suite in ("format_integrity", "distractor_validation", "privacy") for o in ok.outcomes
    )
    broken = break_copy(
        wh_path, tmp_path / "imp-broken.duckdb", ["DELETE FROM traces WHERE external_id = 't07'"]
    )
    bad = run_gate(broken, "imported", docs_dir=tmp_path / "docs2")
    assert bad.status == "failed"
    assert {o.expectation for o in bad.failed} == {
        "every evidence trace id exists",
        "every question trace id exists",
    }
    assert COMPILED.compiled == compiled  # the second gate's site: no template compiled again
    site = Path(bad.data_docs or "").parent
    pages = [p.read_text("utf-8") for p in (site / "validations").rglob("*.html")]
    assert pages and any("Failed" in page for page in pages)  # rendered all the same


def test_export_writes_questions_with_choices(bench: Path, tmp_path: Path) -> None:
    with Warehouse.open_reader(bench) as wh:
        files = export_release(wh, "qa-bench", tmp_path / "out")
    doc = json.loads(files[0].read_text("utf-8"))
    assert doc["generated_by"] == {"pipeline": "clonemem", "offline": True}
    # multiple-choice items with five options; privacy tasks have none (their boundary is in `privacy`)
    assert doc["questions"] and all(
        len(q["choices"]) == 5 and q["correct_choice_id"]
        for q in doc["questions"]
        if "privacy" not in q
    )
    assert all(
        q["choices"] == [] and q["correct_choice_id"] is None
        for q in doc["questions"]
        if "privacy" in q
    )
    ids = {t["id"] for t in doc["context"]}
    assert all(set(e["digital_trace_ids"]) <= ids for q in doc["questions"] for e in q["evidence"])
    # and the export imports back cleanly
    with Warehouse.open_writer(tmp_path / "re.duckdb") as wh:
        summary = import_files(wh, "release", files, "re-imported")
    assert summary.questions == len(doc["questions"]) and not summary.unknown_question_types


@pytest.mark.parametrize(
    "check",
    [
        f"{c.suite}: {c.name}"
        for c in __import__("clonemem.expectations.checks", fromlist=["CHECKS"]).CHECKS
    ],
)
def test_every_expectation_is_evaluated_and_met(bench: Path, check: str) -> None:
    """Every registered expectation ran on the generated benchmark and is stored with its verdict (a new
    check is covered here without editing a count)."""
    suite, name = check.split(": ", 1)
    got = rows(
        bench,
        f"SELECT success FROM gate_results r JOIN gate_runs g USING (gate_run_id) WHERE r.suite = '{suite}' "
        f"AND r.expectation = '{name.replace(chr(39), chr(39) * 2)}' ORDER BY g.started_at DESC LIMIT 1",
    )
    assert got == [(True,)], check
