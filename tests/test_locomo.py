"""LoCoMo import (issue 9): both layouts, turn traces, evidence references repaired or reported, never dropped."""

from __future__ import annotations

import copy
import datetime as dt
import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clonemem import ids
from clonemem.cli import app
from clonemem.evaluation.run import load_benchmark
from clonemem.exporters.release import export_release
from clonemem.importers import import_files, locomo
from clonemem.importers.base import ImportFailed
from clonemem.memory.base import Attachment
from clonemem.warehouse import Warehouse
from tests.conftest import write_json

MINI = Path(__file__).parent / "fixtures" / "locomo" / "conv-mini.json"
# The two LoCoMo development conversations live beside the repository (not in it); tests on them skip
# when absent. CLONEMEM_LOCOMO_DEV points elsewhere.
DEV = Path(
    os.environ.get(
        "CLONEMEM_LOCOMO_DEV",
        Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo-dev",
    )
)
DEV_FILES = sorted(DEV.glob("*.json")) if DEV.is_dir() else []
needs_dev = pytest.mark.skipif(not DEV_FILES, reason=f"LoCoMo dev conversations not found in {DEV}")

CONTENT_TABLES = [
    "personas",
    "traces",
    "questions",
    "question_traces",
    "question_choices",
    "question_evidence",
    "evidence",
    "evidence_traces",
    "import_notes",
]


def rows(wh: Warehouse, table: str, cols: str = "*") -> list:
    return sorted(wh.rows(f"SELECT {cols} FROM {table}"), key=lambda r: tuple(str(v) for v in r))


def combined(files: list[Path], tmp_path: Path) -> Path:
    """A locomo10.json-style list wrapping per-conversation files (sample_id = file stem)."""
    samples = []
    for f in files:
        doc = json.loads(f.read_text("utf-8"))
        conv = {k: v for k, v in doc.items() if k != "qa"}
        samples.append(
            {
                "sample_id": f.stem,
                "conversation": conv,
                "qa": doc["qa"],
                "event_summary": {},
                "observation": {},
                "session_summary": {},
            }
        )
    return write_json(tmp_path / "locomo10.json", samples)


def test_turns_become_traces_dated_by_their_session(wh: Warehouse) -> None:
    summary = import_files(wh, "locomo", [MINI], "mini")
    assert (summary.personas, summary.traces, summary.questions, summary.free_text_only) == (
        1,
        7,
        7,
        7,
    )
    got = wh.rows("SELECT external_id, medium, event_date, content FROM traces ORDER BY seq")
    assert [r[0] for r in got] == [
        "conv-mini:D1:1",
        "conv-mini:D1:2",
        "conv-mini:D1:3",
        "conv-mini:D1:4",
        "conv-mini:D2:1",
        "conv-mini:D2:2",
        "conv-mini:D2:3",
    ]
    assert {r[1] for r in got} == {"conversation_turn"}
    start = dt.datetime(2023, 5, 8, 13, 56)
    assert [r[2] for r in got[:4]] == [start + dt.timedelta(minutes=i) for i in range(4)]
    assert got[4][2] == dt.datetime(2023, 6, 27, 10, 37)
    assert got[0][3] == "Ana: Hi Ben! I finally started the pottery class I told you about."
    assert (
        got[2][3]
        == "Ana: Look what I made on the wheel! [shares a photo: a photo of a lopsided clay bowl on a table]"
    )
    assert wh.rows("SELECT person_key, person_name, language FROM personas") == [
        ("conv-mini", "Ana & Ben", "en")
    ]
    # stable content-derived warehouse ids, as elsewhere in the project
    pid = ids.persona_id("mini", "conv-mini", "en")
    assert wh.scalar(
        "SELECT trace_id FROM traces WHERE external_id = 'conv-mini:D1:1'"
    ) == ids.content_id(pid, "trace", "conv-mini:D1:1")


def test_questions_keep_category_and_point_at_their_turns(wh: Warehouse) -> None:
    import_files(wh, "locomo", [MINI], "mini")
    q = {
        r[0]: r[1:]
        for r in wh.rows(
            "SELECT external_id, question_type, source_question_type, source_category, answer, adversarial_answer, "
            "question_time, correct_choice_id FROM questions"
        )
    }
    assert q["conv-mini:q0"][:3] == ("pattern", "multi_hop", "1")
    assert q["conv-mini:q1"][:3] == ("single_point_factual", "temporal", "2")
    assert q["conv-mini:q2"][:3] == ("inferential", "open_domain", "3")
    assert q["conv-mini:q3"][:4] == ("single_point_factual", "single_hop", "4", "3")
    assert q["conv-mini:q4"][:5] == (
        "unanswerable",
        "adversarial",
        "5",
        locomo.NOT_MENTIONED,
        "went to the marathon",
    )
    last_turn = dt.datetime(2023, 6, 27, 10, 39)
    assert {v[5] for v in q.values()} == {
        last_turn + dt.timedelta(days=1)
    }  # asked after the last session
    assert {v[6] for v in q.values()} == {None}  # free text: no choices
    assert wh.scalar("SELECT count(*) FROM question_choices") == 0
    evidence = dict(
        wh.rows(
            "SELECT q.external_id, list(t.external_id ORDER BY qt.seq) FROM questions q JOIN question_traces qt "
            "USING (question_id) JOIN traces t ON t.trace_id = qt.trace_id GROUP BY ALL"
        )
    )
    assert evidence["conv-mini:q0"] == ["conv-mini:D1:1", "conv-mini:D1:2"]
    assert evidence["conv-mini:q2"] == ["conv-mini:D1:3", "conv-mini:D2:2"]
    statement = wh.scalar(
        "SELECT e.statement FROM questions q JOIN question_evidence qe USING (question_id) "
        "JOIN evidence e USING (evidence_id) WHERE q.external_id = 'conv-mini:q1'"
    )
    assert statement == "Ben: I ran the half marathon on Sunday, finished in 1:52!"


def test_turns_keep_their_session_speaker_session_date_and_images(wh: Warehouse) -> None:
    """The fields LoCoMo's protocols and memory systems read beside the text (migration 0023)."""
    import_files(wh, "locomo", [MINI], "mini")
    got = {
        r[0]: r[1:]
        for r in wh.rows(
            "SELECT external_id, session_key, speaker, session_date, attachments::VARCHAR "
            "FROM traces"
        )
    }
    assert got["conv-mini:D1:3"] == (
        "session_1",
        "Ana",
        dt.datetime(2023, 5, 8, 13, 56),
        json.dumps(
            [
                {
                    "caption": "a photo of a lopsided clay bowl on a table",
                    "url": "https://example.org/bowl.jpg",
                }
            ]
        ),
    )
    assert got["conv-mini:D2:3"][3] == json.dumps(
        [{"caption": "a photography of a man holding a medal", "url": None}]
    )
    assert got["conv-mini:D1:1"][3] is None
    (persona,) = load_benchmark(wh, wh.scalar("SELECT benchmark_id FROM benchmarks"))
    turn = next(t for t in persona.traces if t.content.startswith("Ana: Look what I made"))
    assert (turn.session_key, turn.speaker, turn.session_date) == (
        "session_1",
        "Ana",
        dt.datetime(2023, 5, 8, 13, 56),
    )
    assert turn.attachments == (
        Attachment("a photo of a lopsided clay bowl on a table", "https://example.org/bowl.jpg"),
    )
    q4 = next(
        q
        for q in persona.questions
        if q.question
        == wh.scalar("SELECT question FROM questions WHERE external_id = 'conv-mini:q4'")
    )
    assert q4.source_category == "5"


def test_malformed_references_are_split_normalised_or_reported_with_their_path(
    wh: Warehouse,
) -> None:
    summary = import_files(wh, "locomo", [MINI], "mini")
    assert summary.note_counts == {"normalised": 2, "split": 1, "unresolved": 3}
    assert summary.questions_without_evidence == 2  # q6 as published; q5 names only missing turns
    notes = wh.rows("SELECT json_path, kind, raw, resolved FROM import_notes ORDER BY seq")
    assert notes == [
        ("$.qa[0].evidence[0]", "split", "D1:1; D1:2", "D1:1, D1:2"),
        ("$.qa[2].evidence[0]", "normalised", "D1:03", "D1:3"),
        ("$.qa[5].evidence[0]", "unresolved", "D9:9", None),
        ("$.qa[5].evidence[1]", "normalised", "D30:05", "D30:5"),
        ("$.qa[5].evidence[1]", "unresolved", "D30:05", None),
        ("$.qa[5].evidence[2]", "unresolved", "7", None),
    ]


def test_combined_layout_gives_the_same_benchmark(tmp_path: Path) -> None:
    files = [MINI, *DEV_FILES]
    with (
        Warehouse.open_writer(tmp_path / "a.duckdb") as a,
        Warehouse.open_writer(tmp_path / "b.duckdb") as b,
    ):
        per_file = import_files(a, "locomo", files, "locomo")
        together = import_files(b, "locomo", [combined(files, tmp_path)], "locomo")
        assert (together.personas, together.traces, together.questions) == (
            per_file.personas,
            per_file.traces,
            per_file.questions,
        )
        for table in CONTENT_TABLES:
            # the source file's name differs, and the JSON paths of notes ($[0].qa vs $.qa); nothing else
            cols = (
                "* EXCLUDE (source_file, json_path)"
                if table == "import_notes"
                else "* EXCLUDE (source_file)"
                if table == "personas"
                else "*"
            )
            assert rows(a, table, cols) == rows(b, table, cols), table
        paths = {r[0] for r in b.rows("SELECT json_path FROM import_notes")}
        assert (
            "$[0].qa[0].evidence[0]" in paths
        )  # JSON paths name the sample in the combined layout


@needs_dev
def test_dev_conversations(wh: Warehouse) -> None:
    summary = import_files(wh, "locomo", [DEV], "locomo-dev")
    assert summary.personas == 2
    per_file = [json.loads(f.read_text("utf-8")) for f in DEV_FILES]
    turns = sum(
        len(v)
        for d in per_file
        for k, v in d.items()
        if k.startswith("session_") and isinstance(v, list)
    )
    assert summary.traces == turns
    assert summary.questions == sum(len(d["qa"]) for d in per_file)
    # every reference is loaded, repaired or reported: none silently dropped
    refs = sum(len(q["evidence"]) for d in per_file for q in d["qa"])
    loaded = wh.scalar("SELECT count(*) FROM question_traces")
    split_extra = sum(
        len(r[0].split(", ")) - 1
        for r in wh.rows("SELECT resolved FROM import_notes WHERE kind = 'split'")
    )
    unresolved = wh.scalar("SELECT count(*) FROM import_notes WHERE kind = 'unresolved'")
    assert loaded + unresolved == refs + split_extra
    # a question's evidence is the turn it names
    got = wh.rows(
        "SELECT t.external_id, t.content FROM questions q JOIN question_traces qt USING (question_id) "
        "JOIN traces t ON t.trace_id = qt.trace_id WHERE q.external_id = '26:q0'"
    )
    assert got == [
        ("26:D1:3", "Caroline: I went to a LGBTQ support group yesterday and it was so powerful.")
    ]


def _broken(mutate) -> dict:
    doc = json.loads(MINI.read_text("utf-8"))
    mutate(doc)
    return doc


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.pop("session_2_date_time"), "$.session_2_date_time: session date missing"),
        (
            lambda d: d.__setitem__("session_1_date_time", "sometime in May"),
            "$.session_1_date_time: session date not a date",
        ),
        (lambda d: d["session_1"][2].pop("text"), "$.session_1[2].text: required field is missing"),
        (
            lambda d: d["session_2"].__setitem__(0, "hello"),
            "$.session_2[0]: Input should be a valid dictionary",
        ),
        (lambda d: d["qa"][3].pop("category"), "$.qa[3].category: required field is missing"),
        (lambda d: d.__setitem__("qa", {"x": 1}), "$.qa: expected a list of questions (got dict)"),
        (
            lambda d: d.__setitem__("session_1", "oops"),
            "$.session_1: a session is a list of turns (got str)",
        ),
    ],
)
def test_malformed_conversations_name_file_and_path(
    wh: Warehouse, tmp_path: Path, mutate, message
) -> None:
    bad = write_json(tmp_path / "bad.json", _broken(mutate))
    with pytest.raises(ImportFailed) as err:
        import_files(wh, "locomo", [bad], "x")
    assert f"{bad}: {message}" in str(err.value)
    assert wh.scalar("SELECT count(*) FROM benchmarks") == 0


def test_not_a_locomo_file(wh: Warehouse, tmp_path: Path, demo_file: Path) -> None:
    with pytest.raises(ImportFailed, match=r"lin_chen.json: \$: not a LoCoMo file"):
        import_files(wh, "locomo", [demo_file], "x")


def test_duplicate_turn_ids_are_kept_and_reported(wh: Warehouse, tmp_path: Path) -> None:
    doc = _broken(
        lambda d: d["session_2"].append({"speaker": "Ana", "dia_id": "D2:1", "text": "Again?"})
    )
    summary = import_files(wh, "locomo", [write_json(tmp_path / "dup.json", doc)], "x")
    assert summary.traces == 8 and summary.note_counts["duplicate_turn"] == 1
    assert wh.scalar("SELECT count(*) FROM traces WHERE external_id = 'dup:D2:1#2'") == 1


def test_session_dates(wh: Warehouse) -> None:
    assert locomo.parse_session_date("1:56 pm on 8 May, 2023") == dt.datetime(2023, 5, 8, 13, 56)
    assert locomo.parse_session_date("12:09 am on 13 September, 2023") == dt.datetime(
        2023, 9, 13, 0, 9
    )
    assert locomo.parse_session_date("12:30 pm on 1 Jan 2024") == dt.datetime(2024, 1, 1, 12, 30)
    assert locomo.parse_session_date("2023-05-08T13:56:00") == dt.datetime(2023, 5, 8, 13, 56)
    assert locomo.parse_session_date("13:56 pm on 8 May, 2023") is None
    assert locomo.parse_session_date("1:56 pm on 31 February, 2023") is None


def cli(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def test_cli_import_locomo_refuses_existing_name_unless_told(tmp_path: Path) -> None:
    wh = tmp_path / "wh.duckdb"
    got = cli("--warehouse", wh, "import", "locomo", MINI, "--name", "L")
    assert got.exit_code == 0, got.output
    assert (
        "evidence references repaired or unresolved (see table import_notes): normalised ×2, split ×1, unresolved ×3"
        in got.output
    )
    assert "$.qa[5].evidence[0]: unresolved 'D9:9'" in got.output
    assert cli("--warehouse", wh, "import", "locomo", MINI, "--name", "L").exit_code == 1
    other = write_json(tmp_path / "other.json", json.loads(MINI.read_text("utf-8")))
    got = cli("--warehouse", wh, "import", "locomo", other, "--name", "L", "--append")
    assert got.exit_code == 0 and "benchmark now: personas 2, traces 14, questions 14" in got.output
    got = cli("--warehouse", wh, "import", "locomo", MINI, "--name", "L", "--replace")
    assert got.exit_code == 0 and "replaced benchmark 'L'" in got.output
    with Warehouse.open_reader(wh) as r:
        assert r.rows("SELECT personas, traces, questions FROM v_benchmarks") == [(1, 7, 7)]
        assert r.scalar("SELECT count(*) FROM import_notes") == 6


def test_release_export_of_a_locomo_benchmark_round_trips(tmp_path: Path) -> None:
    with Warehouse.open_writer(tmp_path / "a.duckdb") as a:
        import_files(a, "locomo", [MINI], "L")
        files = export_release(a, "L", tmp_path / "out")
        first = {t: rows(a, t) for t in CONTENT_TABLES if t != "import_notes"}
    doc = json.loads(files[0].read_text("utf-8"))
    assert (
        doc["questions"][4]["question_type"] == "adversarial"
        and doc["questions"][4]["locomo_category"] == 5
    )
    with Warehouse.open_writer(tmp_path / "b.duckdb") as b:
        import_files(b, "release", files, "L")
        assert {t: rows(b, t) for t in first} == first


def test_flow_imports_locomo(tmp_path: Path) -> None:
    from clonemem.flows.imports import import_flow

    summary = import_flow("locomo", [str(MINI)], "flowed", str(tmp_path / "wh.duckdb"))
    assert (summary.traces, summary.questions, summary.note_counts["split"]) == (7, 7, 1)
    assert copy.copy(summary.mode) == "created"
