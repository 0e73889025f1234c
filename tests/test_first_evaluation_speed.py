"""The first evaluation a user runs (issue: speed on distinct conversations): the derived benchmark data
(`benchmarks/locomo_distinct.py`), stored items made once per question time yet right after a rebuild,
the LLM call rows landed in batches, their stored texts held packed until then, and the Prefect server started ahead of the flow and used by it."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from benchmarks import locomo_distinct
from clonemem.importers.locomo import parse_locomo_text
from clonemem.llm.types import CallRecord
from clonemem.memory import SYSTEMS
from clonemem.memory.base import BuildContext
from tests.memory_kit import REMOTE, day, trace

ROOT = Path(__file__).resolve().parent.parent
needs_dev = pytest.mark.skipif(
    not locomo_distinct.DEV.is_dir(), reason=f"no LoCoMo conversations at {locomo_distinct.DEV}"
)


@pytest.fixture(scope="module")
def derived() -> list[dict]:
    return locomo_distinct.derived_conversations(8)


def _turns(sample: dict) -> list[dict]:
    conv = sample["conversation"]
    return [
        t for k, v in conv.items() if k.startswith("session_") and isinstance(v, list) for t in v
    ]


@needs_dev
def test_derived_conversations_share_no_turn_text_and_have_the_held_out_size(
    derived: list[dict],
) -> None:
    seen = Counter(text for sample in derived for text in {t["text"] for t in _turns(sample)})
    assert not [t for t, n in seen.items() if n > 1]
    traces = sum(len(_turns(s)) for s in derived)
    questions = sum(len(s["qa"]) for s in derived)
    assert 4_800 <= traces <= 5_300 and 1_600 <= questions <= 1_800, (traces, questions)
    assert len({s["conversation"]["speaker_a"] for s in derived}) == 8
    assert derived == locomo_distinct.derived_conversations(8)  # deterministic


@needs_dev
def test_derived_evidence_cites_turns_of_its_own_conversation_and_imports_cleanly(
    derived: list[dict],
) -> None:
    for sample in derived:
        ids = {t["dia_id"] for t in _turns(sample)}
        assert all(set(q["evidence"]) <= ids for q in sample["qa"]), sample["sample_id"]
    personas = parse_locomo_text(json.dumps(derived), "locomo-derived.json")
    assert len(personas) == 8
    for p in personas:
        assert not [n for n in p.notes if n.kind == "unresolved"]
        traces = {t.id for t in p.release.context}
        assert all(set(q.digital_trace_ids) <= traces for q in p.release.questions)


def _source(speakers: tuple[str, str], tag: str) -> dict:
    a, b = speakers
    conv = {"speaker_a": a, "speaker_b": b}
    for n, date in ((1, "1:56 pm on 8 May, 2023"), (2, "7:55 pm on 9 June, 2023")):
        conv[f"session_{n}_date_time"] = date
        conv[f"session_{n}"] = [
            {
                "speaker": (a, b)[j % 2],
                "dia_id": f"D{n}:{j + 1}",
                "text": f"{tag} session {n} turn {j + 1} about item {tag}{n}{j}.",
            }
            for j in range(3)
        ]
    qa = [
        {
            "question": f"What about {tag}{n}{j}?",
            "answer": f"item {tag}{n}{j} in 2023",
            "category": 4,
            "evidence": [f"D{n}:{j + 1}"],
        }
        for n in (1, 2)
        for j in range(3)
    ]
    return {**conv, "qa": qa}


def test_a_derived_question_cites_the_reworded_turn_its_source_question_cited() -> None:
    sources = {"26": _source(("Caroline", "Melanie"), "x"), "30": _source(("Jon", "Gina"), "y")}
    derived = locomo_distinct.derived_conversations(3, turns=12, questions=12, sources=sources)
    for i, sample in enumerate(derived):
        turns = {t["dia_id"]: t["text"] for t in _turns(sample)}
        assert len(sample["qa"]) == 12
        for q in sample["qa"]:
            item = q["question"].removeprefix("What about ").rstrip("?")
            cited = [turns[e] for e in q["evidence"]]
            assert len(cited) == 1 and cited[0].endswith(f"about item {item}."), (i, q, cited)
            assert q["answer"] == f"item {item} in {2023 + i}"  # years shift with the conversation
    texts = [t for sample in derived for t in {t["text"] for t in _turns(sample)}]
    assert len(texts) == len(
        set(texts)
    )  # the same source turn, a different text in each conversation


def _no_llm(stage: str, inp: object) -> object:
    raise AssertionError(f"no LLM step expected ({stage})")


@pytest.mark.parametrize("name", ["bm25", "random", "oracle", "full_context"])
def test_stored_items_are_shared_per_time_and_follow_a_rebuild(name: str) -> None:
    system = SYSTEMS.get(name)()
    system.build(REMOTE, BuildContext(llm=_no_llm))
    at = day("2023-05-10T21:00:00")
    first = system.stored(at)
    assert (
        system.stored(at) == first and system.stored(at) is not first
    )  # a list of its own each time
    first.clear()
    assert system.stored(at)  # the caller's list, not the shared items
    later = trace("n9", "2023-05-10T20:00:00", "Moved the piano into the hallway today.", "diary")
    system.build(
        [*REMOTE, later], BuildContext(llm=_no_llm)
    )  # the default ingest rebuilds like this
    assert "n9" in {t for i in system.stored(at) for t in i.trace_ids}
    assert "n9" in {t for i in system.stored() for t in i.trace_ids}


def test_llm_calls_land_in_batches_all_of_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import clonemem.evaluation.land as land
    from clonemem.warehouse import Warehouse

    monkeypatch.setattr(land, "CALLS_PER_BATCH", 3)
    calls = [
        CallRecord(
            f"call-{i}",
            "run",
            "eval.judge",
            "judge",
            "offline",
            "offline-judge",
            True,
            "h",
            day("2024-01-01"),
            prompt_text=f"prompt {i}",
            response_text="{}",
        )
        for i in range(8)
    ]
    with Warehouse.open_writer(tmp_path / "wh.duckdb") as wh:
        assert land.land_calls(wh, calls) == 8
        got = wh.rows("SELECT call_id, prompt_text FROM llm_calls ORDER BY call_id")
    assert got == [(f"call-{i}", f"prompt {i}") for i in range(8)]


def _stored_call(prompt: str | None, reply: str | None = "{}") -> CallRecord:
    return CallRecord(
        "call-1",
        "run",
        "eval.answer_free",
        "answerer",
        "offline",
        "offline-answerer",
        True,
        "h",
        day("2024-01-01"),
        prompt_text=prompt,
        response_text=reply,
    )


def test_a_call_record_holds_its_stored_texts_packed_and_gives_them_back_whole() -> None:
    prompt = json.dumps(
        [
            {"role": "system", "content": "You are the AI clone of Ana."},
            {
                "role": "user",
                "content": "Memories:\n"
                + "\n".join(f"[{i}] Ana: ran 5 km by the river, day {i}" for i in range(200)),
            },
        ]
    )
    rec = _stored_call(prompt)
    held = sum(len(v) for v in rec.__dict__.values() if isinstance(v, (str, bytes)))
    assert held < len(prompt) / 3  # held packed: what an evaluation keeps until it lands
    assert rec.prompt_text == prompt and rec.response_text == "{}"
    assert rec.row()["prompt_text"] == prompt and rec.row()["response_text"] == "{}"
    assert "warehouse" not in rec.row() and len(rec.row()) == 21  # with error_class and attempt_log
    again = pickle.loads(pickle.dumps(rec))  # as Prefect persists and serves a cached result
    assert again == rec and again.prompt_text == prompt
    assert (
        _stored_call(None, None).row()["prompt_text"] is None
        and _stored_call(None, None).response_text is None
    )
    assert _stored_call(prompt) != _stored_call(prompt + " ")
    rec.prompt_text = "replaced"
    assert (
        rec.prompt_text == "replaced" and pickle.loads(pickle.dumps(rec)).prompt_text == "replaced"
    )


def test_a_call_record_pickled_with_plain_texts_still_reads_them() -> None:
    """A result Prefect cached before texts were packed: its records' state holds them plain."""
    rec = _stored_call(None, None)
    state = {k: v for k, v in rec.__dict__.items() if not k.endswith("_z")}
    old = CallRecord.__new__(CallRecord)
    old.__dict__.update(
        {**state, "prompt_text": '[{"role": "user", "content": "q"}]', "response_text": "a"}
    )
    assert old.prompt_text == '[{"role": "user", "content": "q"}]' and old.response_text == "a"
    assert old.row()["prompt_text"] == '[{"role": "user", "content": "q"}]'


@pytest.mark.slow
def test_the_flow_runs_on_the_server_started_ahead_without_importing_prefects_server_code(
    tmp_path: Path,
) -> None:
    script = textwrap.dedent("""
        import sys
        from clonemem import prefect_env
        prefect_env.configure()
        prefect_env.start_server_early()
        from prefect import flow

        @flow
        def twice(x: int) -> int:
            return 2 * x

        with prefect_env.on_early_server():
            got = twice(21)
        prefect_env.start_server_early()  # a second command in this process: the same server serves it
        with prefect_env.on_early_server():
            again = twice(2)
        print(got, again, "prefect.server.api.server" in sys.modules, prefect_env.temporary_server_url() is not None,
              len(prefect_env._servers))
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")} | {
        "PREFECT_HOME": str(tmp_path / "home")
    }
    done = subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["42", "4", "False", "True", "1"]
