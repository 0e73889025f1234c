"""PersonaMem import (issue 28 §2): a persona per shared context, its system message as narrative (never a
memory), multiple-choice questions, and each question's end index: no message at or after it reaches a
memory system for that question, replayed or built whole. Bad files: file, CSV line and column."""

from __future__ import annotations

import datetime as dt
import json
import shutil
from collections.abc import Sequence
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clonemem.cli import app
from clonemem.evaluation.run import build_and_retrieve, load_benchmark
from clonemem.exporters.release import export_release
from clonemem.importers import IMPORTERS, import_files, importer
from clonemem.importers.base import ImportFailed
from clonemem.importers.personamem import PersonaMemImporter, message_time
from clonemem.memory.base import (
    SYSTEMS,
    BuildContext,
    MemorySystem,
    MemoryTrace,
    QuestionView,
    Retrieved,
)
from clonemem.warehouse import Warehouse

FIXTURES = Path(__file__).parent / "fixtures" / "personamem"
QUESTIONS = FIXTURES / "questions_mini.csv"
CONTEXTS = FIXTURES / "shared_contexts_mini.jsonl"
END_INDEX = {"c1f0e2aa-0001": 3, "c1f0e2aa-0002": 7, "c1f0e2aa-0003": 5, "d2e3f4a5-0001": 3}


def test_a_shared_context_is_one_persona_and_its_system_message_no_memory(wh: Warehouse) -> None:
    summary = import_files(wh, "personamem", [QUESTIONS, CONTEXTS], "pm")
    assert (summary.personas, summary.traces, summary.questions, summary.free_text_only) == (
        2,
        8,
        4,
        0,
    )
    personas = wh.rows("SELECT person_key, person_name, narrative FROM personas ORDER BY seq")
    assert personas == [
        (
            "3f1a0c9e",
            "persona 11",
            "Current user persona: Mara Lind, 34, a nurse in Malmo who plays jazz piano.",
        ),
        (
            "9b77d2c4",
            "persona 12",
            "Current user persona: Omar Haddad, 52, a bus driver who loves hiking.",
        ),
    ]
    got = wh.rows(
        "SELECT t.external_id, t.speaker, t.event_date, t.content, t.session_key FROM traces t "
        "JOIN personas p USING (persona_id) WHERE p.person_key = '3f1a0c9e' ORDER BY t.seq"
    )
    assert [r[0] for r in got] == [
        f"3f1a0c9e:{i}" for i in range(1, 7)
    ]  # message 0, the persona, is no trace
    assert [r[1] for r in got[:2]] == ["user", "assistant"] and got[0][2] == message_time(1)
    assert got[0][3] == "user: I have started learning the saxophone this month."
    assert {r[4] for r in got} == {
        "3f1a0c9e"
    }  # PersonaMem has no sessions: the shared context stands for one
    assert wh.scalar("SELECT count(*) FROM traces WHERE content LIKE '%Current user persona%'") == 0


def test_questions_are_multiple_choice_with_their_type_and_topic(wh: Warehouse) -> None:
    import_files(wh, "personamem", [QUESTIONS, CONTEXTS], "pm")
    q = {
        r[0]: r[1:]
        for r in wh.rows(
            "SELECT external_id, question_type, source_question_type, source_category, dimension, correct_choice_id, "
            "answer, question_time FROM questions"
        )
    }
    assert q["c1f0e2aa-0001"] == (
        "single_point_factual",
        "recall_user_shared_facts",
        "recall_user_shared_facts",
        "musicPractice",
        "b",
        "The saxophone.",
        message_time(3) - dt.timedelta(seconds=1),
    )
    assert q["c1f0e2aa-0002"][:2] == ("trajectory", "track_full_preference_evolution")
    assert q["d2e3f4a5-0001"][3:5] == ("hiking", "c")
    choices = wh.rows(
        "SELECT c.choice_id, c.text FROM question_choices c JOIN questions q USING (question_id) "
        "WHERE q.external_id = 'c1f0e2aa-0003' ORDER BY c.seq"
    )  # options given as JSON
    assert choices == [
        ("a", "You could take up the saxophone again."),
        ("b", "The piano suits you: maybe more headphone practice?"),
        ("c", "Drums would be a great start."),
        ("d", "You never played music."),
    ]
    assert (
        PersonaMemImporter.protocols == ("personamem",)
        and IMPORTERS.get("personamem") is PersonaMemImporter
    )


class Recorder(MemorySystem):
    """Holds what it is given; retrieves every trace visible at the question's time (the as-of filter every
    built-in applies), and records, per question, what it held and what it returned."""

    name = "recorder"
    held: dict[str, set[str]] = {}
    returned: dict[str, set[str]] = {}

    def build(self, traces: Sequence[MemoryTrace], ctx: BuildContext) -> None:
        self.traces = list(traces)

    def retrieve(self, question: QuestionView, k: int) -> list[Retrieved]:
        visible = [t for t in self.traces if t.event_date <= question.question_time]
        Recorder.held.setdefault(question.question_id, set()).update(
            t.trace_id for t in self.traces
        )
        Recorder.returned.setdefault(question.question_id, set()).update(
            t.trace_id for t in visible
        )
        return [Retrieved(t.content, (t.trace_id,)) for t in visible[:k]]


@pytest.mark.parametrize("replay", [True, False], ids=["replay", "built_whole"])
def test_no_message_at_or_after_the_end_index_reaches_a_system(wh: Warehouse, replay: bool) -> None:
    import_files(wh, "personamem", [QUESTIONS, CONTEXTS], "pm")
    Recorder.held, Recorder.returned = {}, {}
    with SYSTEMS.added("recorder", Recorder):
        for persona in load_benchmark(wh, wh.scalar("SELECT benchmark_id FROM benchmarks")):
            build_and_retrieve(
                "recorder", persona, 100, lambda *a, **k: None, 0, lambda: (0, 0), replay=replay
            )
            for q in persona.questions:
                end = END_INDEX[persona.release_ids[q.question_id]]
                seen = Recorder.held[q.question_id] if replay else Recorder.returned[q.question_id]
                indices = sorted(int(persona.release_ids[t].rsplit(":", 1)[1]) for t in seen)
                assert indices == list(range(1, end)), (persona.release_ids[q.question_id], indices)


def test_release_export_and_import_keep_the_questions(tmp_path: Path) -> None:
    cols = (
        "SELECT external_id, question_type, source_question_type, source_category, dimension, correct_choice_id, "
        "question_time FROM questions ORDER BY external_id"
    )
    with Warehouse.open_writer(tmp_path / "a.duckdb") as a:
        import_files(a, "personamem", [QUESTIONS, CONTEXTS], "pm")
        files = export_release(a, "pm", tmp_path / "out")
        want = a.rows(cols)
    with Warehouse.open_writer(tmp_path / "b.duckdb") as b:
        import_files(b, "release", files, "pm")
        assert b.rows(cols) == want
        assert json.loads(b.scalar("SELECT config_json::VARCHAR FROM benchmarks"))["formats"] == [
            "personamem"
        ]


def _copy(
    tmp_path: Path,
    csv_edit: tuple[str, str] | None = None,
    jsonl_edit: tuple[str, str] | None = None,
) -> tuple[Path, Path]:
    q, c = tmp_path / "questions_mini.csv", tmp_path / "shared_contexts_mini.jsonl"
    shutil.copy(QUESTIONS, q)
    shutil.copy(CONTEXTS, c)
    for path, edit in ((q, csv_edit), (c, jsonl_edit)):
        if edit is not None:
            text = path.read_text("utf-8")
            assert edit[0] in text
            path.write_text(text.replace(edit[0], edit[1], 1), "utf-8")
    return q, c


@pytest.mark.parametrize(
    ("csv_edit", "jsonl_edit", "where", "message"),
    [
        (
            ("['(a) On the beach.',", "{'(a) On the beach.',"),
            None,
            "questions_mini.csv: line 5, column all_options",
            "expected a list of option strings",
        ),
        (
            (",(c),", ",c,"),
            None,
            "questions_mini.csv: line 5, column correct_answer",
            "expected one of the options' labels",
        ),
        (
            (",9b77d2c4,3", ",9b77d2c4,4"),
            None,
            "questions_mini.csv: line 5, column end_index_in_shared_context",
            "expected a message index 1..3",
        ),
        (
            (",9b77d2c4,", ",nope,"),
            None,
            "questions_mini.csv: line 5, column shared_context_id",
            "shared context 'nope' is not in",
        ),
        (
            ("user_question_or_message", "user_message"),
            None,
            "questions_mini.csv: line 1",
            "missing column user_question_or_message",
        ),
        (
            None,
            ('"role": "assistant", "content": "Great', '"content": "Great'),
            "shared_contexts_mini.jsonl: line 2: $.9b77d2c4[2]",
            "a message is",
        ),
        (
            None,
            ('{"9b77d2c4":', '{"9b77d2c4" '),
            "shared_contexts_mini.jsonl: line 2",
            "not valid JSON",
        ),
    ],
)
def test_a_bad_file_is_refused_with_its_line_and_column_and_nothing_is_stored(
    tmp_path: Path,
    csv_edit: tuple[str, str] | None,
    jsonl_edit: tuple[str, str] | None,
    where: str,
    message: str,
) -> None:
    q, c = _copy(tmp_path, csv_edit, jsonl_edit)
    with Warehouse.open_writer(tmp_path / "wh.duckdb") as wh:
        with pytest.raises(ImportFailed) as err:
            import_files(wh, "personamem", [q, c], "pm")
        assert wh.scalar("SELECT count(*) FROM benchmarks") == 0
    (line,) = str(err.value).splitlines()
    assert line.startswith(f"{tmp_path}/{where}") and message in line, line


def test_two_files_of_the_right_kinds_are_needed() -> None:
    with pytest.raises(ImportFailed, match="questions_mini.csv: no shared contexts file"):
        importer("personamem").parse_paths([QUESTIONS])
    with pytest.raises(ImportFailed, match="shared_contexts_mini.jsonl: no questions file"):
        importer("personamem").parse_paths([CONTEXTS])
    assert len(importer("personamem").parse_paths([FIXTURES])) == 2  # a folder holding the pair


def cli(*args: object):
    return CliRunner().invoke(app, [str(a) for a in args])


def test_cli_imports_personamem_end_to_end(tmp_path: Path) -> None:
    wh = tmp_path / "wh.duckdb"
    got = cli("--warehouse", wh, "import", "personamem", QUESTIONS, CONTEXTS, "--name", "pm")
    assert got.exit_code == 0, got.output
    assert "personas 2, traces 8, questions 4" in got.output
    got = cli("--warehouse", wh, "import", "personamem", QUESTIONS, "--name", "pm2")
    assert (
        got.exit_code == 1 and "questions_mini.csv: no shared contexts file (.jsonl)" in got.output
    )
    with Warehouse.open_reader(wh) as r:
        assert r.scalar("SELECT count(*) FROM benchmarks") == 1
