"""LongMemEval import (issue 28 §1): LongMemEval's own ids, evidence turns and sessions, dates, abstention,
a session shared by instances stored once, the turn fields through evaluation and the release format,
and bad files refused with their JSON path and nothing stored."""

from __future__ import annotations

import copy
import datetime as dt
import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from benchmarks import locomo_to_longmemeval
from clonemem.cli import app
from clonemem.evaluation.run import load_benchmark
from clonemem.exporters.release import export_release
from clonemem.importers import IMPORTERS, import_files
from clonemem.importers.base import ImportFailed, import_stream
from clonemem.importers.longmemeval import LongMemEvalImporter
from clonemem.warehouse import Warehouse
from clonemem.warehouse.lifecycle import drop_benchmark
from tests.conftest import write_json

FIXTURE = Path(__file__).parent / "fixtures" / "longmemeval" / "longmemeval_mini.json"
DEV = Path(os.environ.get("CLONEMEM_LOCOMO_DEV", "/work/shared/data/locomo-dev"))
DEV_FILES = sorted(DEV.glob("*.json")) if DEV.is_dir() else []
needs_dev = pytest.mark.skipif(not DEV_FILES, reason=f"LoCoMo dev conversations not found in {DEV}")


def doc() -> list[dict]:
    return json.loads(FIXTURE.read_text("utf-8"))


def traces(wh: Warehouse, person: str) -> list[tuple]:
    return wh.rows(
        "SELECT t.external_id, t.session_key, t.speaker, t.session_date, t.event_date, t.content "
        "FROM v_traces t JOIN personas p USING (persona_id) WHERE p.person_key = ? ORDER BY t.seq",
        [person],
    )


def test_turns_keep_longmemeval_ids_sessions_speakers_and_dates(wh: Warehouse) -> None:
    summary = import_files(wh, "longmemeval", [FIXTURE], "lme")
    assert (summary.personas, summary.traces, summary.questions, summary.free_text_only) == (
        3,
        16,
        3,
        3,
    )
    got = traces(wh, "e47becba")
    assert [r[0] for r in got] == [
        "sharegpt_yywfmeJ_0_1",
        "sharegpt_yywfmeJ_0_2",
        "answer_4be1b6b4_1_1",
        "answer_4be1b6b4_1_2",
        "answer_4be1b6b4_1_3",
        "ultrachat_361521_1",
        "ultrachat_361521_2",
        "answer_4be1b6b4_2_1",
        "answer_4be1b6b4_2_2",
    ]
    assert [r[1] for r in got[:3]] == [
        "sharegpt_yywfmeJ_0",
        "sharegpt_yywfmeJ_0",
        "answer_4be1b6b4_1",
    ]
    assert [r[2] for r in got[2:5]] == ["user", "assistant", "user"]
    session = dt.datetime(2023, 5, 22, 18, 4)
    assert got[2][3:5] == (session, session) and got[4][4] == session + dt.timedelta(milliseconds=2)
    # a second session of the same date comes a second later, in haystack order
    assert got[5][3:5] == (session, session + dt.timedelta(seconds=1))
    assert got[2][5] == "user: My first pottery class took 3 hours, I made a bowl."
    assert wh.scalar("SELECT person_name FROM personas WHERE person_key = 'e47becba'") == "e47becba"


def test_questions_keep_their_type_evidence_turns_and_sessions(wh: Warehouse) -> None:
    import_files(wh, "longmemeval", [FIXTURE], "lme")
    q = {
        r[0]: r[1:]
        for r in wh.rows(
            "SELECT external_id, question_type, source_question_type, source_category, evidence_sessions::VARCHAR, "
            "question_time, answer, correct_choice_id FROM questions"
        )
    }
    assert q["e47becba"][:4] == (
        "pattern",
        "multi-session",
        "multi-session",
        '["answer_4be1b6b4_1", "answer_4be1b6b4_2"]',
    )
    # the last session is of the question's own minute: the question is asked after its turns
    assert q["e47becba"][4] == dt.datetime(2023, 5, 30, 23, 40) + dt.timedelta(milliseconds=1)
    assert q["gpt4_2655b836"][:4] == (
        "single_point_factual",
        "single-session-assistant",
        "single-session-assistant",
        '["answer_ultrachat_55"]',
    )
    assert q["gpt4_2655b836"][4] == dt.datetime(2023, 6, 10, 8, 0)
    # abstention: the id keeps its suffix, the type is the project's unanswerable, LongMemEval's label stays
    assert q["118b2229_abs"][:4] == (
        "unanswerable",
        "single-session-user",
        "single-session-user",
        "[]",
    )
    assert {v[6] for v in q.values()} == {None}  # free text
    evidence = dict(
        wh.rows(
            "SELECT q.external_id, list(t.external_id ORDER BY qt.seq) FROM questions q JOIN question_traces qt "
            "USING (question_id) JOIN traces t ON t.trace_id = qt.trace_id GROUP BY ALL"
        )
    )
    assert evidence == {
        "e47becba": ["answer_4be1b6b4_1_1", "answer_4be1b6b4_2_1"],
        "gpt4_2655b836": ["answer_ultrachat_55_2"],
    }  # an assistant turn holds this answer
    statement = wh.scalar(
        "SELECT e.statement FROM questions q JOIN question_evidence qe USING (question_id) "
        "JOIN evidence e USING (evidence_id) WHERE q.external_id = 'gpt4_2655b836'"
    )
    assert statement == "assistant: Try the cat-cow stretch, 10 repetitions every morning."


def test_a_session_shared_by_two_instances_is_stored_once(wh: Warehouse) -> None:
    import_files(wh, "longmemeval", [FIXTURE], "lme")
    assert wh.scalar("SELECT count(*) FROM traces") == 16
    assert (
        wh.scalar("SELECT count(*) FROM trace_texts") == 12
    )  # 9 + 3 distinct texts; the _abs history repeats
    shared = wh.rows(
        "SELECT p.person_key, t.text_id, t.content FROM traces t JOIN personas p USING (persona_id) "
        "WHERE t.external_id = 'sharegpt_yywfmeJ_0_1' ORDER BY p.person_key"
    )
    assert [r[0] for r in shared] == ["118b2229_abs", "e47becba"]
    assert shared[0][1] == shared[1][1] and shared[0][2] == shared[1][2] == ""
    assert (
        wh.scalar(
            "SELECT count(*) FROM trace_texts WHERE content = 'user: Can you suggest a recipe for lentil soup?'"
        )
        == 1
    )
    import_files(wh, "longmemeval", [FIXTURE], "lme", mode="replace")  # texts are not stored twice
    assert wh.scalar("SELECT count(*) FROM trace_texts") == 12
    drop_benchmark(wh, wh.scalar("SELECT benchmark_id FROM benchmarks"))
    assert wh.scalar("SELECT count(*) FROM trace_texts") == 0  # no trace holds them any more


def test_batches_do_not_change_what_is_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A streamed import lands a batch at a time (here one persona each): the same rows as one batch."""
    from clonemem.importers import base

    query = (
        "SELECT p.person_key, p.seq, t.external_id, t.seq, t.text_id, t.event_date FROM traces t "
        "JOIN personas p USING (persona_id) ORDER BY ALL"
    )
    with Warehouse.open_writer(tmp_path / "one.duckdb") as wh:
        import_files(wh, "longmemeval", [FIXTURE], "lme")
        whole = (wh.rows(query), wh.rows("SELECT * FROM trace_texts ORDER BY ALL"))
    monkeypatch.setattr(base, "STREAM_BATCH_TRACES", 1)
    with Warehouse.open_writer(tmp_path / "many.duckdb") as wh:
        import_files(wh, "longmemeval", [FIXTURE], "lme")
        assert (wh.rows(query), wh.rows("SELECT * FROM trace_texts ORDER BY ALL")) == whole


def test_evaluation_loads_the_turn_fields_and_the_evidence_sessions(wh: Warehouse) -> None:
    import_files(wh, "longmemeval", [FIXTURE], "lme")
    personas = {
        p.person_key: p
        for p in load_benchmark(wh, wh.scalar("SELECT benchmark_id FROM benchmarks"))
    }
    p = personas["gpt4_2655b836"]
    turn = next(t for t in p.traces if p.release_ids[t.trace_id] == "answer_ultrachat_55_2")
    assert (
        turn.content == "assistant: Try the cat-cow stretch, 10 repetitions every morning."
    )  # read back
    assert (turn.session_key, turn.speaker, turn.session_date) == (
        "answer_ultrachat_55",
        "assistant",
        dt.datetime(2023, 6, 1, 7, 30),
    )
    (q,) = personas["e47becba"].questions
    assert q.evidence_sessions == ("answer_4be1b6b4_1", "answer_4be1b6b4_2")
    assert q.source_category == "multi-session"
    assert personas["118b2229_abs"].questions[0].question_type == "unanswerable"


def test_release_export_and_import_keep_the_new_fields(tmp_path: Path) -> None:
    cols = (
        "SELECT p.person_key, t.external_id, t.seq, t.event_date, t.content, t.session_key, t.speaker, "
        "t.session_date FROM v_traces t JOIN personas p USING (persona_id) ORDER BY ALL"
    )
    qcols = (
        "SELECT external_id, question, question_type, source_question_type, source_category, "
        "evidence_sessions::VARCHAR, question_time, answer FROM questions ORDER BY ALL"
    )
    with Warehouse.open_writer(tmp_path / "a.duckdb") as a:
        import_files(a, "longmemeval", [FIXTURE], "lme")
        first = export_release(a, "lme", tmp_path / "out")
        want = (a.rows(cols), a.rows(qcols))
    exported = json.loads((tmp_path / "out" / first[0].name).read_text("utf-8"))
    assert exported["source_format"] == "longmemeval"
    turn = exported["context"][0]
    assert {k: turn[k] for k in ("session_key", "speaker", "session_date")} == {
        "session_key": turn["id"].rsplit("_", 1)[0],
        "speaker": "user",
        "session_date": turn["session_date"],
    }
    with Warehouse.open_writer(tmp_path / "b.duckdb") as b:
        import_files(b, "release", first, "lme")
        assert (b.rows(cols), b.rows(qcols)) == want
        config = json.loads(b.scalar("SELECT config_json::VARCHAR FROM benchmarks"))
        assert config["formats"] == [
            "longmemeval"
        ]  # the copy is scored by the same standard protocols
        again = export_release(b, "lme", tmp_path / "again")
    assert [f.read_bytes() for f in again] == [f.read_bytes() for f in first]


def test_the_importer_declares_its_protocols() -> None:
    assert IMPORTERS.get("longmemeval") is LongMemEvalImporter
    assert LongMemEvalImporter.protocols == ("longmemeval",)
    assert IMPORTERS.get("locomo").protocols == ("locomo", "mem0")
    assert IMPORTERS.get("release").protocols == ()


def _bad(items: list[dict], case: str) -> object:
    if case == "role":
        items[1]["haystack_sessions"][0][0]["role"] = "bot"
    elif case == "date":
        items[0]["haystack_dates"][2] = "yesterday"
    elif case == "missing":
        del items[2]["question_date"]
    elif case == "lengths":
        items[2]["haystack_dates"].append("2023/06/02 (Fri) 09:15")
    elif case == "object":
        return {"instances": items}
    return items


@pytest.mark.parametrize(
    ("case", "where", "message"),
    [
        ("role", "$[1].haystack_sessions[0][0].role", "Input should be 'user' or 'assistant'"),
        ("date", "$[0].haystack_dates[2]", 'not a date: "yesterday"'),
        ("missing", "$[2].question_date", "required field is missing"),
        ("lengths", "$[2]", "must have one entry per session"),
        ("object", "$", "not a JSON list"),
    ],
)
def test_a_bad_file_is_refused_with_its_json_path_and_nothing_is_stored(
    tmp_path: Path, case: str, where: str, message: str
) -> None:
    bad = write_json(tmp_path / "bad.json", _bad(copy.deepcopy(doc()), case))
    with pytest.raises(ImportFailed) as err:
        import_stream(tmp_path / "new.duckdb", LongMemEvalImporter(), [bad], "lme")
    (line,) = str(err.value).splitlines()
    assert line.startswith(f"{bad}: {where}: ") and message in line, line
    assert not (
        tmp_path / "new.duckdb"
    ).exists()  # a failed import into a new warehouse leaves no file
    # into a warehouse that holds a benchmark: the instances read before the bad one are rolled back
    with Warehouse.open_writer(tmp_path / "held.duckdb") as wh:
        import_files(wh, "longmemeval", [FIXTURE], "first")
    with pytest.raises(ImportFailed):
        import_stream(tmp_path / "held.duckdb", LongMemEvalImporter(), [bad], "second")
    with Warehouse.open_reader(tmp_path / "held.duckdb") as r:
        assert r.rows(
            "SELECT count(*) FROM personas UNION ALL SELECT count(*) FROM trace_texts "
            "UNION ALL SELECT count(*) FROM benchmarks"
        ) == [(3,), (12,), (1,)]


def test_broken_json_names_the_instance_it_stopped_in(tmp_path: Path) -> None:
    text = FIXTURE.read_text("utf-8")
    cut = tmp_path / "cut.json"
    cut.write_text(text[: text.index("gpt4_2655b836") + 40], "utf-8")
    with pytest.raises(ImportFailed, match=r"cut.json: \$\[2\]: not valid JSON"):
        import_stream(tmp_path / "wh.duckdb", LongMemEvalImporter(), [cut], "lme")


def cli(*args: object):
    return CliRunner().invoke(app, [str(a) for a in args])


def test_cli_imports_longmemeval_end_to_end(tmp_path: Path) -> None:
    wh = tmp_path / "wh.duckdb"
    got = cli("--warehouse", wh, "import", "longmemeval", FIXTURE, "--name", "lme")
    assert got.exit_code == 0, got.output
    assert "personas 3, traces 16, questions 3" in got.output
    bad = write_json(tmp_path / "bad.json", _bad(copy.deepcopy(doc()), "date"))
    got = cli("--warehouse", tmp_path / "other.duckdb", "import", "longmemeval", bad, "--name", "x")
    assert got.exit_code == 1 and f"{bad}: $[0].haystack_dates[2]: not a date" in got.output
    assert not (tmp_path / "other.duckdb").exists()


@pytest.fixture
def converted(tmp_path: Path) -> Path:
    """The two LoCoMo development conversations as a LongMemEval-format file (5 questions each)."""
    out = tmp_path / "locomo_as_longmemeval.json"
    locomo_to_longmemeval.convert(DEV_FILES, out, per_conversation=5)
    return out


@needs_dev
def test_locomo_conversations_convert_to_a_longmemeval_file_that_imports(
    converted: Path, wh: Warehouse
) -> None:
    items = json.loads(converted.read_text("utf-8"))
    assert items[0]["question_id"] == "26_q0" and len(items) == 10
    summary = import_files(wh, "longmemeval", [converted], "locomo-lme")
    assert summary.personas == 10 and summary.questions == 10
    turns = {
        p: wh.scalar(
            "SELECT count(*) FROM traces t JOIN personas USING (persona_id) WHERE person_key = ?",
            [p],
        )
        for p in ("26_q0", "30_q0")
    }
    # every instance of a conversation holds it whole; each turn text is stored once for all of them
    assert summary.traces == 5 * turns["26_q0"] + 5 * turns["30_q0"]
    assert wh.scalar("SELECT count(*) FROM trace_texts") <= turns["26_q0"] + turns["30_q0"]
    first = items[0]
    want = [
        f"{sid}_{n}"
        for sid, session in zip(
            first["haystack_session_ids"], first["haystack_sessions"], strict=True
        )
        for n, turn in enumerate(session, start=1)
        if turn.get("has_answer")
    ]
    got = wh.rows(
        "SELECT list(t.external_id ORDER BY qt.seq) FROM questions q JOIN question_traces qt "
        "USING (question_id) JOIN traces t ON t.trace_id = qt.trace_id WHERE q.external_id = '26_q0'"
    )
    assert got == [(want,)] and want and all(w.startswith("answer_26_session_") for w in want)
