"""Chronological replay and the memory protocol without Prefect: the schedule gives only the past, the
built-ins score the same replayed as built at once (bm25: bounded), the client's errors name the URL,
the call and the field, and the OpenAPI file is the protocol's models."""

from __future__ import annotations

import datetime as dt
import json
import re
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from clonemem.evaluation import metrics as M
from clonemem.evaluation.replay import schedule
from clonemem.evaluation.run import PersonaData, Retrieval, build_and_retrieve, load_benchmark
from clonemem.importers import import_files
from clonemem.memory import SYSTEMS
from clonemem.memory.base import BuildContext, MemoryTrace, QuestionView, Retrieved
from clonemem.memory.errors import MemorySystemFailed
from clonemem.memory.remote import RemoteOptions, remote_system
from clonemem.memory.simple import _Traces
from clonemem.schemas.memory_protocol import Trace, openapi
from clonemem.warehouse import Warehouse
from tests.memory_kit import REMOTE, day
from tests.protocol_kit import Faulty, faulty, free_port

ROOT = Path(__file__).resolve().parents[1]
FAST = RemoteOptions(timeout_s=5, retries=2, concurrency=2)


@pytest.fixture(scope="module")
def persona(tmp_path_factory) -> PersonaData:
    from clonemem.demo import fixture_files

    path = tmp_path_factory.mktemp("replay") / "wh.duckdb"
    with Warehouse.open_writer(path) as wh:
        import_files(wh, "release", fixture_files(), "fixture")
        (bid,) = wh.rows("SELECT benchmark_id FROM benchmarks")[0]
        return load_benchmark(wh, bid)[0]


def run(system: str, persona: PersonaData, replay: bool, k: int = 5) -> Retrieval:
    return build_and_retrieve(
        system, persona, k, llm=None, seed=3, usage=lambda: (0, 0), replay=replay
    )


# -- the schedule ---------------------------------------------------------------------------------


def test_the_schedule_gives_each_question_the_past_and_nothing_later() -> None:
    asked = [
        ("late", day("2023-05-10T21:00:00")),
        ("early", day("2023-01-20T18:00:00")),
        ("same", day("2023-01-20T18:00:00")),
        ("first", day("2023-01-01T00:00:00")),
    ]
    steps = schedule(REMOTE, asked, lambda q: q[1])
    assert [[q[0] for q in s.questions] for s in steps] == [["first"], ["early", "same"], ["late"]]
    assert [[t.trace_id for t in s.traces] for s in steps] == [[], ["r1", "c1"], ["r2", "r3", "r4"]]
    given: list[MemoryTrace] = []
    for step in steps:
        given += step.traces
        for _, when in step.questions:
            assert given and max(t.event_date for t in given) <= when or not given
            assert all(t.event_date > when for t in REMOTE if t not in given)
    # traces after the last question are given at the end (what is stored then covers the history)
    tail = schedule(REMOTE, [("q", day("2023-02-01T00:00:00"))], lambda q: q[1])
    assert [t.trace_id for t in tail[-1].traces] == ["r2", "r3", "r4"] and tail[-1].questions == ()


class Recorder(_Traces):
    """Records, at each question, the latest trace it had been given (its own ``ingest`` path)."""

    name = "recorder"
    seen: dict[str, tuple[int, dt.datetime | None]] = {}

    def ingest(self, traces: Sequence[MemoryTrace], ctx: BuildContext) -> None:
        self.held = [*getattr(self, "held", []), *traces]

    def retrieve(self, question: QuestionView, k: int) -> list[Retrieved]:
        held = getattr(self, "held", [])
        Recorder.seen[question.question_id] = (
            len(held),
            max((t.event_date for t in held), default=None),
        )
        return [Retrieved(t.content, (t.trace_id,)) for t in held[-k:]]

    def stored(self, as_of=None) -> list[Retrieved]:
        return [Retrieved(t.content, (t.trace_id,)) for t in getattr(self, "held", [])]


def test_replay_feeds_a_system_only_the_past_and_everything_by_the_end(
    persona: PersonaData,
) -> None:
    Recorder.seen = {}
    with SYSTEMS.added("recorder", Recorder):
        out = run("recorder", persona, replay=True)
    assert set(Recorder.seen) == {q.question_id for q in persona.questions}
    for q in persona.questions:
        n, latest = Recorder.seen[q.question_id]
        assert n == sum(t.event_date <= q.question_time for t in persona.traces)
        assert latest is None or latest <= q.question_time
    assert list(out.results) == [q.question_id for q in persona.questions]  # the benchmark's order
    assert out.write_coverage == 1.0  # the traces after the last question were given too


# -- built-ins: replayed as built ---------------------------------------------------------------


@pytest.mark.parametrize("system", ["oracle", "oracle_statements", "full_context", "random"])
def test_a_built_in_replayed_retrieves_what_it_retrieves_built_at_once(
    persona: PersonaData, system: str
) -> None:
    batch, replayed = run(system, persona, replay=False), run(system, persona, replay=True)
    assert {q: r[:2] for q, r in replayed.results.items()} == {
        q: r[:2] for q, r in batch.results.items()
    }
    assert replayed.write_coverage == batch.write_coverage


def _recall(persona: PersonaData, out: Retrieval, k: int) -> float:
    values = [
        M.recall_at_k(
            q.evidence_sets, [t for item in out.results[q.question_id][1] for t in item], k
        )["recall_flat"]
        for q in persona.questions
    ]
    return sum(v for v in values if v is not None) / len(values)


def test_bm25_replayed_differs_only_by_its_corpus_statistics(persona: PersonaData) -> None:
    """Built at once, BM25's IDF and length norm count every trace, later ones too; replayed, only those
    given so far. Same candidates, same tokens: only the scores' corpus statistics differ, so the
    items retrieved are always dated at or before the question, and recall@k moves by at most 0.02."""
    batch, replayed = run("bm25", persona, replay=False), run("bm25", persona, replay=True)
    when = {t.trace_id: t.event_date for t in persona.traces}
    for q in persona.questions:
        assert all(
            when[t] <= q.question_time for item in replayed.results[q.question_id][1] for t in item
        )
        assert len(replayed.results[q.question_id][0]) == len(batch.results[q.question_id][0])
    for k in (1, 3, 5):
        assert abs(_recall(persona, replayed, k) - _recall(persona, batch, k)) <= 0.02


def test_replaying_an_llm_built_system_without_its_own_ingest_is_refused_with_a_live_model() -> (
    None
):
    from clonemem.evaluation.replay import replay_refused

    mem0 = SYSTEMS.get("mem0") if "mem0" in SYSTEMS else None
    flat = SYSTEMS.get("flat_combined")  # summarises every trace while building
    message = replay_refused(flat, extractor_live=True)
    assert message and "'flat_combined' calls an LLM while building" in message
    assert (
        replay_refused(flat, extractor_live=False) is None
    )  # offline: rebuilding costs time, not money
    assert replay_refused(SYSTEMS.get("bm25"), extractor_live=True) is None
    assert mem0 is None or replay_refused(mem0, extractor_live=True)


# -- the client: errors name the URL, the call and the field ------------------------------------


def _remote(url: str):
    cls = remote_system(None, url, FAST)
    return cls()


def _drive(memory, persona: PersonaData) -> list[list[Retrieved]]:
    ctx = BuildContext(llm=None, persona_id=persona.public_id, release_ids=persona.release_ids)  # type: ignore[arg-type]
    memory.reset(ctx)
    memory.ingest(persona.traces, ctx)
    return [memory.retrieve(q.view(), 3) for q in persona.questions]


def test_an_unreachable_url_is_one_line_naming_it_and_the_call() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(MemorySystemFailed) as err:
        remote_system(None, url, FAST)
    text = str(err.value)
    assert "\n" not in text and url in text and "GET /v1/info: failed after 3 attempts in " in text
    assert text.endswith(
        "s: unreachable (ConnectionRefusedError: [Errno 111] Connection refused)"
    ), text


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        (Faulty(status_on=("/v1/ingest", 400)), "POST /v1/ingest: HTTP 400: "),
        (Faulty(status_on=("/v1/query", 422)), "POST /v1/query: HTTP 422: "),
        (
            Faulty(garbage_on="/v1/query"),
            "POST /v1/query: reply is not JSON: <html>not json</html>",
        ),
        (
            Faulty(drop_field="trace_ids"),
            "POST /v1/query: reply field items[0].trace_ids is missing",
        ),
        (Faulty(drop_field="text"), "POST /v1/query: reply field items[0].text is missing"),
        (
            Faulty(extra_trace=True),
            "POST /v1/query: reply field items[0].trace_ids[1] names trace 'never-sent', "
            "which was never given to it",
        ),
        (Faulty(status_on=("/v1/query", 500)), "POST /v1/query: failed after 3 attempts in "),
    ],
    ids=[
        "ingest-400",
        "query-422",
        "query-not-json",
        "no-trace_ids",
        "no-text",
        "unknown-trace",
        "query-500",
    ],
)
def test_a_bad_server_fails_with_one_line_naming_url_call_and_field(
    persona: PersonaData, fault: Faulty, expected: str
) -> None:
    with faulty(fault) as url:
        memory = _remote(url)
        with pytest.raises(MemorySystemFailed) as err:
            _drive(memory, persona)
    text = str(err.value)
    assert "\n" not in text and text.startswith(f"memory system 'faulty': {url}: {expected}"), text


def test_transient_failures_are_retried_and_ids_are_the_release_ids(persona: PersonaData) -> None:
    fault = Faulty(fail_first=2)
    with faulty(fault) as url:
        memory = _remote(url)  # GET /v1/info answered 503 twice, then 200
        got = _drive(memory, persona)
    assert fault.calls[:3] == ["GET /v1/info"] * 3
    sent = {t["trace_id"] for held in fault.traces.values() for t in held}
    assert sent == {persona.release_ids[t.trace_id] for t in persona.traces}  # never warehouse ids
    assert list(fault.traces) == [persona.public_id] and persona.public_id == "lin_chen"
    warehouse_ids = {t.trace_id for t in persona.traces}
    assert got and all(
        set(i.trace_ids) <= warehouse_ids for items in got for i in items
    )  # mapped back
    assert memory.provenance_extra == {
        "url": url,
        "name": "faulty",
        "version": "0",
        "protocol": "1.1",
        "features": "",
    }


def test_a_server_indexing_asynchronously_is_waited_for_and_bounded(persona: PersonaData) -> None:
    fault = Faulty(ready_after=3)
    with faulty(fault) as url:
        memory = _remote(url)
        got = _drive(memory, persona)
    assert got and fault.calls[:4] == [
        "GET /v1/info",
        "POST /v1/reset",
        "POST /v1/ingest",
        "GET /v1/ready",
    ]
    ingest = fault.calls.index("POST /v1/ingest")
    assert fault.calls[ingest + 1 : ingest + 5] == ["GET /v1/ready"] * 3 + [
        "POST /v1/query"
    ]  # asked once ready
    with faulty(Faulty(ready_after=10**9)) as url:
        memory = remote_system(None, url, FAST.model_copy(update={"ready_s": 0.5}))()
        started = time.monotonic()
        with pytest.raises(MemorySystemFailed) as err:
            _drive(memory, persona)
    assert time.monotonic() - started < 2
    assert re.search(
        r"GET /v1/ready: still not ready 0\.\d s after the ingest \(evaluation.remote_ready_s = 0.5 s\)$",
        str(err.value),
    ), str(err.value)


def test_protocol_1_2_carries_the_sources_speaker_session_and_attachments(tmp_path: Path) -> None:
    """A LoCoMo turn reaches a server with its speaker, session, session date and photo as fields (its
    content still the text every system reads), the reset with the person's name, the query with its ks."""
    with Warehouse.open_writer(tmp_path / "wh.duckdb") as wh:
        import_files(
            wh, "locomo", [ROOT / "tests" / "fixtures" / "locomo" / "conv-mini.json"], "mini"
        )
        (bid,) = wh.rows("SELECT benchmark_id FROM benchmarks")[0]
        mini = load_benchmark(wh, bid)[0]
    fault = Faulty()
    bodies: list[dict] = []
    answer = fault.answer

    def recording(method: str, path: str, body: dict) -> tuple[int, bytes]:
        bodies.append({"call": f"{method} {path}", **body})
        return answer(method, path, body)

    fault.answer = recording  # type: ignore[method-assign]  # the test listens to every body
    with faulty(fault) as url:
        memory = _remote(url)
        ctx = BuildContext(
            llm=None,
            persona_id=mini.public_id,
            release_ids=mini.release_ids,  # type: ignore[arg-type]
            persona_name=mini.name,
        )
        memory.reset(ctx)
        memory.ingest(mini.traces, ctx)
        q = mini.questions[0]
        memory.retrieve(replace(q.view(), ks=(3, 5)), 5)
    reset = next(b for b in bodies if b["call"] == "POST /v1/reset")
    assert reset["name"] == mini.name and reset["format_version"] == "1.2"
    traces = [t for b in bodies if b["call"] == "POST /v1/ingest" for t in b["traces"]]
    photo = next(t for t in traces if t["attachments"] and t["attachments"][0]["url"])
    assert photo["attachments"] == [
        {
            "caption": "a photo of a lopsided clay bowl on a table",
            "url": "https://example.org/bowl.jpg",
        }
    ]
    assert photo["speaker"] and photo["content"].startswith(
        photo["speaker"] + ": "
    )  # content as systems read it
    assert "[shares a photo: " + photo["attachments"][0]["caption"] in photo["content"]
    assert photo["session_id"].startswith("session_") and re.fullmatch(
        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", photo["session_date"]
    )
    assert photo["session_date"] <= photo["event_date"]
    assert all(Trace.model_validate(t) for t in traces)
    query = next(b for b in bodies if b["call"] == "POST /v1/query")
    assert query["ks"] == [3, 5] and query["k"] == 5 and query["format_version"] == "1.2"


def test_a_server_without_stored_has_unknown_write_coverage(persona: PersonaData) -> None:
    with faulty(Faulty(stored=False)) as url:
        memory = _remote(url)
        _drive(memory, persona)
        with pytest.raises(NotImplementedError):
            memory.stored()


# -- the server ----------------------------------------------------------------------------------


def test_serve_memory_keeps_what_it_is_sent_once_in_order_and_refuses_clearly() -> None:
    import threading

    import httpx

    from clonemem.memory.serve import make_server, service_for
    from clonemem.schemas.config import RunConfig

    server = make_server(service_for("bm25", RunConfig()), 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"

    def trace(tid: str, when: str, text: str) -> dict:
        return {"trace_id": tid, "medium": "diary", "event_date": when, "content": text}

    def ask(question: str) -> list:
        return httpx.post(
            f"{url}/v1/query",
            json={
                "persona_id": "p",
                "question_id": "q",
                "question": question,
                "question_time": "2024-02-01T00:00:00",
                "k": 5,
            },
        ).json()["items"]

    try:
        info = httpx.get(f"{url}/v1/info").json()
        assert (
            info["name"] == "clonemem-bm25" and info["protocol"] == info["format_version"] == "1.2"
        )
        assert info["features"] == ["stored"]
        future = httpx.post(
            f"{url}/v1/reset", json={"format_version": "2.0", "persona_id": "p", "language": "en"}
        )
        assert (
            future.status_code == 400
            and "memory protocol 2.0 is not supported" in future.json()["error"]
        )
        assert (
            httpx.post(
                f"{url}/v1/query",
                json={
                    "persona_id": "p",
                    "question_id": "q",
                    "question": "x",
                    "question_time": "2024-02-01T00:00:00",
                    "k": 5,
                },
            ).status_code
            == 404
        )
        assert (
            httpx.post(f"{url}/v1/reset", json={"persona_id": "p", "language": "en"}).status_code
            == 204
        )
        batch = [
            trace("t1", "2024-01-01T09:00:00", "I adopted a grey cat called Pixel"),
            trace("t2", "2024-01-02T09:00:00", "Long hike in the hills"),
        ]
        for _ in range(2):  # a retried batch is kept once
            assert (
                httpx.post(
                    f"{url}/v1/ingest", json={"persona_id": "p", "traces": batch}
                ).status_code
                == 204
            )
        got = ask("what is the cat called")
        assert [i["trace_ids"] for i in got] == [["t1"], ["t2"]] and got[0]["score"] > got[1][
            "score"
        ]
        assert len(httpx.get(f"{url}/v1/stored", params={"persona_id": "p"}).json()["items"]) == 2
        late = httpx.post(
            f"{url}/v1/ingest",
            json={"persona_id": "p", "traces": [trace("t0", "2023-12-31T00:00:00", "x")]},
        )
        assert late.status_code == 400 and "traces[0].event_date" in late.json()["error"]
        bad = httpx.post(f"{url}/v1/query", json={"persona_id": "p", "question": "x"})
        assert bad.status_code == 422 and bad.json()["error"] == "field question_id: Field required"
    finally:
        server.shutdown()
        server.server_close()


def test_the_example_server_speaks_1_2_and_refuses_another_major_version() -> None:
    import httpx

    from tests.protocol_kit import stdlib_server

    with stdlib_server() as url:
        info = httpx.get(f"{url}/v1/info").json()
        refused = httpx.post(
            f"{url}/v1/reset", json={"format_version": "2.0", "persona_id": "p", "language": "en"}
        )
        cls = remote_system(None, url, FAST)
    assert info["protocol"] == "1.2" and "stored" in info["features"]
    assert refused.status_code == 400 and "2.0" in refused.json()["error"]
    assert (
        cls.provenance_extra["protocol"] == "1.2"
        and cls.provenance_extra["features"] == "attachments,stored"
    )


# -- the documents --------------------------------------------------------------------------------


def test_the_openapi_file_is_the_protocols_models() -> None:
    doc = json.loads((ROOT / "docs" / "memory-protocol.openapi.json").read_text("utf-8"))
    assert doc == openapi(), (
        "regenerate: python -m clonemem.schemas.memory_protocol > docs/memory-protocol.openapi.json"
    )
    assert set(doc["paths"]) == {
        "/v1/info",
        "/v1/reset",
        "/v1/ingest",
        "/v1/query",
        "/v1/stored",
        "/v1/ready",
    }
    query = doc["components"]["schemas"]["QueryRequest"]
    assert set(query["required"]) == {"persona_id", "question_id", "question", "question_time", "k"}
