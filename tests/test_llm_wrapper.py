"""The wrapper every call goes through: validation feedback, retries, limits, accounting, the switch."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import pytest

from clonemem import prompts
from clonemem.llm.model import MemorySink, Model, RetryPolicy, get_model
from clonemem.llm.providers.base import ModelAPI
from clonemem.llm.types import (
    CallFailed,
    GenerateRequest,
    GenerateResult,
    InvalidOutputError,
    LiveProviderDisabled,
    PermanentError,
    TransientError,
)
from clonemem.memory.memsys_stages import SUMMARIZE_TRACE
from clonemem.offline import ScriptExhausted, scripted
from clonemem.schemas.config import RunConfig
from clonemem.schemas.memory import TraceSummary, TraceText
from clonemem.stages import offline_override

TRACE = TraceText(
    trace_id="t1",
    medium="diary",
    event_date="2023-03-04T15:20:00",
    content="First sketch in years: the old tram depot on Harbour Street. Wobbly lines, very happy. "
    "Anna and Tomas want to sketch the botanical garden next Saturday.",
)


def summarize(model: Model, trace: TraceText = TRACE) -> TraceSummary:
    return SUMMARIZE_TRACE.run(model, trace)


def config(**offline: object) -> RunConfig:
    return RunConfig.model_validate({"providers": {"offline": offline}})


def test_offline_is_deterministic_and_extractive() -> None:
    a = summarize(get_model(config(), "extractor"))
    b = summarize(get_model(config(), "extractor"))
    assert a == b
    assert "tram" in a.keyphrases and "depot" in a.keyphrases
    assert all(
        f in TRACE.content for f in a.facts
    )  # facts are taken from the trace, never invented
    assert a.summary.startswith("diary on 2023-03-04:")


def test_faults_do_not_change_the_answer() -> None:
    clean = [summarize(get_model(config(), "extractor"), t) for t in _traces(30)]
    sink = MemorySink()
    faulty_model = get_model(
        config(transient_failure_rate=0.3, malformed_rate=0.3), "extractor", sink=sink
    )
    faulty = [summarize(faulty_model, t) for t in _traces(30)]
    assert faulty == clean
    attempts = [r.attempts for r in sink.records]
    assert max(attempts) > 1 and all(r.outcome == "ok" for r in sink.records)
    assert faulty_model.usage.calls == 30 and faulty_model.usage.attempts == sum(attempts)


def _traces(n: int) -> list[TraceText]:
    return [
        TRACE.model_copy(update={"trace_id": f"t{i}", "content": TRACE.content + f" Day {i}."})
        for i in range(n)
    ]


def test_a_request_without_an_offline_handler_is_permanent() -> None:
    model = get_model(config(), "extractor")
    req = model.request("no.such.stage", prompts.Prompt("x", "s", "u", "h"), TraceSummary)
    with pytest.raises(PermanentError, match="stage 'no.such.stage' declares no offline handler"):
        model.structured(req, TraceSummary)


def test_scripted_handler_fails_loudly_when_exhausted() -> None:
    model = get_model(config(), "extractor")
    with offline_override("memory.summarize_trace", scripted([TraceSummary(summary="one")])):
        assert summarize(model).summary == "one"
        with pytest.raises(ScriptExhausted):
            summarize(model)


# -- a stub provider to watch the wrapper's behaviour -------------------------------------------


@dataclass
class StubAPI(ModelAPI):
    replies: list = field(default_factory=list)
    seen: list = field(default_factory=list)
    delay: float = 0.0
    provider = "stub"

    def __post_init__(self) -> None:
        self.model = "m"
        self.inflight = 0
        self.max_inflight = 0
        self._lock = threading.Lock()

    @classmethod
    def from_config(cls, model: str, config: RunConfig) -> StubAPI:  # pragma: no cover
        raise NotImplementedError

    def generate(self, request: GenerateRequest) -> GenerateResult:
        with self._lock:
            self.seen.append(request)
            self.inflight += 1
            self.max_inflight = max(self.max_inflight, self.inflight)
            reply = self.replies.pop(0) if self.replies else '{"summary": "ok"}'
        try:
            time.sleep(self.delay)
            if isinstance(reply, Exception):
                raise reply
            return GenerateResult(text=reply, input_tokens=100, output_tokens=20)
        finally:
            with self._lock:
                self.inflight -= 1


def stub_model(
    api: StubAPI, *, retries: int = 3, vretries: int = 2, limit: int = 4, sink=None, sleeps=None
):
    policy = RetryPolicy(
        max_retries=retries, max_validation_retries=vretries, backoff_base_s=1.0, backoff_max_s=8.0
    )
    from clonemem.schemas.config import ModelPrice

    return Model(
        api,
        "extractor",
        policy,
        threading.BoundedSemaphore(limit),
        ModelPrice(input_per_mtok=1.0, output_per_mtok=10.0),
        sink=sink,
        sleep=(sleeps.append if sleeps is not None else (lambda s: None)),
    )


def plain_request() -> GenerateRequest:
    from clonemem.llm.types import Message

    return GenerateRequest(
        stage="s", role="extractor", system="sys", messages=(Message("user", "hi"),)
    )


def test_validation_error_is_fed_back_then_accepted() -> None:
    api = StubAPI(replies=['{"keyphrases": []}', '```json\n{"summary": "fixed"}\n```'])
    sink = MemorySink()
    out = stub_model(api, sink=sink).structured(plain_request(), TraceSummary)
    assert out.summary == "fixed"
    second = api.seen[1].messages
    assert [m.role for m in second] == ["user", "assistant", "user"]
    assert "summary: Field required" in second[2].content
    rec = sink.records[0]
    assert (rec.attempts, rec.outcome, rec.input_tokens, rec.output_tokens) == (2, "ok", 200, 40)
    assert rec.cost_usd == pytest.approx((200 * 1.0 + 40 * 10.0) / 1e6)


def test_invalid_output_gives_up_after_bounded_retries() -> None:
    api = StubAPI(replies=["not json"] * 5)
    sink = MemorySink()
    with pytest.raises(InvalidOutputError, match="no valid TraceSummary after 3 attempts"):
        stub_model(api, vretries=2, sink=sink).structured(plain_request(), TraceSummary)
    assert len(api.seen) == 3 and sink.records[0].outcome == "invalid_output"


def test_transient_errors_retry_with_backoff_and_retry_after() -> None:
    api = StubAPI(
        replies=[TransientError("429", retry_after=2.5), TransientError("503"), '{"summary": "x"}']
    )
    sleeps: list[float] = []
    assert stub_model(api, sleeps=sleeps).structured(plain_request(), TraceSummary).summary == "x"
    assert sleeps[0] == 2.5  # retry-after honoured
    assert (
        1.0 <= sleeps[1] <= 2.0
    )  # exponential backoff, second retry: base * 2, jittered down to half


def test_transient_errors_exhaust_the_budget() -> None:
    api = StubAPI(replies=[TransientError("503")] * 10)
    sink = MemorySink()
    with pytest.raises(CallFailed, match="gave up after 3 attempts"):
        stub_model(api, retries=2, sink=sink).structured(plain_request(), TraceSummary)
    assert sink.records[0].outcome == "transient_error"


def test_permanent_errors_are_not_retried() -> None:
    api = StubAPI(replies=[PermanentError("401 auth")])
    sink = MemorySink()
    with pytest.raises(PermanentError):
        stub_model(api, sink=sink).structured(plain_request(), TraceSummary)
    assert len(api.seen) == 1 and sink.records[0].outcome == "permanent_error"


def test_concurrency_limit_per_provider() -> None:
    api = StubAPI(delay=0.05)
    model = stub_model(api, limit=2)
    threads = [
        threading.Thread(target=model.structured, args=(plain_request(), TraceSummary))
        for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert api.max_inflight == 2 and len(api.seen) == 8


def test_live_switch_refuses_real_endpoints(monkeypatch) -> None:
    monkeypatch.setenv("CLONEMEM_DISABLE_LIVE_LLM", "1")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secret")
    cfg = RunConfig.model_validate({"models": {"judge": "anthropic/claude-haiku-4-5"}})
    with pytest.raises(LiveProviderDisabled, match="CLONEMEM_DISABLE_LIVE_LLM"):
        get_model(cfg, "judge")
    local = RunConfig.model_validate(
        {
            "models": {"judge": "anthropic/claude-haiku-4-5"},
            "providers": {
                "anthropic": {"base_url": "http://127.0.0.1:9", "api_key_env": "ANTHROPIC_API_KEY"}
            },
        }
    )
    assert get_model(local, "judge").ref == "anthropic/claude-haiku-4-5"
