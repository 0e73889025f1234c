"""What outsiders read equals what the harness does (issue 30, item 7), one test per disagreement found:
the release trace fields are named where a memory-system builder reads; a results file's build time and
spend are blank, as the README says; a results file without `written` leaves the write step blank on
every benchmark; `/v1/stored` is asked once per question time; `bm25=URL` is a usage error found
before any network contact."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest

from clonemem.evaluation.diagnosis import verdict
from clonemem.evaluation.land import system_stats
from clonemem.evaluation.results_file import FileRetrieval, file_retrieval
from clonemem.evaluation.run import (
    EvalQuestion,
    Outcome,
    PersonaData,
    build_and_retrieve,
    load_benchmark,
    question_metrics,
)
from clonemem.importers import import_files
from clonemem.memory.base import MemoryTrace
from clonemem.memory.remote import (
    LabelTaken,
    RemoteOptions,
    refuse_registered_labels,
    resolve_systems,
)
from clonemem.schemas.release import ReleaseTrace
from clonemem.warehouse import Warehouse
from tests.protocol_kit import Faulty, Raw, faulty, raw

ROOT = Path(__file__).resolve().parents[1]
PROTOCOL_DOC = (ROOT / "docs/memory-protocol.md").read_text("utf-8")
README = (ROOT / "README.md").read_text("utf-8")


def test_every_release_trace_field_is_named_where_a_builder_reads() -> None:
    named = set(re.findall(r"`context\[\]\.(\w+)`", PROTOCOL_DOC))
    assert set(ReleaseTrace.model_fields) <= named, set(ReleaseTrace.model_fields) - named
    own = README[README.index("## Evaluating your own memory system") :]
    step = own[: own.index("2. **Run your system")]
    assert all(f"`{f}`" in step for f in ("id", "medium", "event_date", "content", "reached")), step


def _persona() -> PersonaData:
    when = dt.datetime(2024, 3, 1, 12)
    trace = MemoryTrace("t1", "diary", when - dt.timedelta(days=1), "I adopted a cat called Pixel.")
    asked = EvalQuestion(
        "q1",
        "p",
        "What is the cat called?",
        "factual",
        "fact",
        when,
        "Pixel",
        None,
        (),
        (("t1",),),
        ("The cat is called Pixel.",),
    )
    no_evidence = EvalQuestion(
        "q2",
        "p",
        "What did I eat on Mars?",
        "adversarial",
        "fact",
        when,
        "Nothing",
        None,
        (),
        (),
        (),
    )
    return PersonaData("p", "p", "Lin", "en", (trace,), (asked, no_evidence), "p", {})


def test_a_results_files_build_time_and_spend_are_blank_as_the_readme_says() -> None:
    persona = _persona()
    got = file_retrieval("mine", persona, {"q1": FileRetrieval()}, None)
    stats = system_stats(["mine"], [persona], {("mine", "p"): got})["mine"]
    assert (
        stats["build_seconds"] is None
        and stats["llm_calls"] is None
        and stats["llm_tokens"] is None
    )
    assert (
        "LLM spend are not\nknown for a file (blank)" in README
        or "are not known for a file (blank)" in " ".join(README.split())
    )


def test_write_failure_without_written_is_blank_with_or_without_evidence() -> None:
    persona = _persona()
    always = lambda statement, texts: [True] * len(texts)  # noqa: E731  # every item states every statement
    got = file_retrieval("mine", persona, {}, always)
    answered = Outcome(
        "q", 10, "Pixel", None, {"qa_consistency": 3, "mem_covered": 0, "mem_helpful": 2}, None
    )
    rows = [question_metrics("mine", 5, q, got, answered) for q in persona.questions]
    assert [r["write_failure"] for r in rows] == [
        None,
        None,
    ]  # was [None, 0.0]: 0.000 on such a benchmark
    assert (
        verdict((), 5, True)["write_failure"] == 0.0
    )  # a built-in's question without evidence: nothing to write


def test_stored_is_asked_once_per_question_time_as_the_doc_says(tmp_path: Path) -> None:
    from clonemem.demo import fixture_files
    from clonemem.memory import SYSTEMS
    from clonemem.memory.remote import remote_system

    with Warehouse.open_writer(tmp_path / "wh.duckdb") as wh:
        import_files(wh, "release", fixture_files(), "fixture")
        (bid,) = wh.rows("SELECT benchmark_id FROM benchmarks")[0]
        persona = load_benchmark(wh, bid)[0]
    shared = persona.questions[0].question_time
    persona = PersonaData(
        **{
            **persona.__dict__,
            "questions": tuple(
                q if i > 1 else EvalQuestion(**{**q.__dict__, "question_time": shared})
                for i, q in enumerate(persona.questions)
            ),
        }
    )
    server = Faulty()
    with faulty(server) as url:
        cls = remote_system("mine", url, RemoteOptions(timeout_s=5, retries=0))
        with SYSTEMS.added("mine", cls):
            build_and_retrieve(
                "mine",
                persona,
                5,
                llm=None,
                seed=0,
                usage=lambda: (0, 0),  # type: ignore[arg-type]
                supports=lambda s, texts: [False] * len(texts),
                replay=True,
            )
    calls = [c for c in server.calls if c != "GET /v1/info"]
    ingests = sum(1 for n, c in enumerate(calls) if c == "POST /v1/ingest" and calls[n - 1] != c)
    stored, queries = calls.count("GET /v1/stored"), calls.count("POST /v1/query")
    # once after each ingest: right after the first question that follows it, or at the end
    assert stored == ingests and stored < queries, calls
    doc = " ".join(PROTOCOL_DOC.split())
    assert "asked at most once per question time" in doc and "right after each query" not in doc


def test_a_remote_system_named_like_a_registered_one_is_refused_before_any_call() -> None:
    server = Raw(lambda method, path, conn: None)
    with raw(server) as url:
        with pytest.raises(
            LabelTaken, match=r"'bm25' is a registered system: give the remote system at"
        ):
            refuse_registered_labels([f"bm25={url}"], {})
        with pytest.raises(LabelTaken):
            resolve_systems(["oracle", f"bm25={url}"], {}, RemoteOptions(timeout_s=1, retries=0))
        with pytest.raises(LabelTaken):
            resolve_systems(["bm25"], {"bm25": url}, RemoteOptions(timeout_s=1, retries=0))
    assert server.connections == 0
