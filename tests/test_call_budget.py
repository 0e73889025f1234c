"""One retry budget per LLM call (issue 31, item 1), at the provider layer: against a loopback server of
each SDK's wire format that reads every request and never replies, a call makes at most
``1 + max_retries`` requests (the SDKs' own retries are off), each attempt ends at ``timeout_s`` and the
whole call at ``call_deadline_s``; its message says the true attempt count and elapsed time; its record
keeps every attempt with its error class; and once a call gave up without any reply, the run's other
calls to that provider stop instead of waiting out their own deadlines."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from clonemem.llm.model import MemorySink, ProviderHealth, get_model
from clonemem.llm.types import CallFailed, ProviderUnresponsive
from clonemem.schemas.config import RunConfig
from clonemem.warehouse import Warehouse
from tests.fakeapi import FakeAPIServer
from tests.test_providers_http import FLAVORS, GOOD, SECRET, ask, land_calls

pytestmark = pytest.mark.timeout(300)


def stuck_model(
    server: FakeAPIServer,
    sink: MemorySink | None = None,
    health: ProviderHealth | None = None,
    **settings: float,
):
    flavor = server.flavor.name
    config = RunConfig.model_validate(
        {
            "models": {"validator": f"{flavor}/test-model"},
            "providers": {
                flavor: {
                    "base_url": server.base_url,
                    "api_key_env": "CLONEMEM_TEST_KEY",
                    "backoff_base_s": 0.1,
                    "backoff_max_s": 0.1,
                    **settings,
                }
            },
        }
    )
    return get_model(config, "validator", sink=sink, health=health)


@pytest.mark.parametrize("flavor", FLAVORS)
def test_a_provider_that_never_answers_gets_max_retries_plus_one_requests(
    flavor: str, monkeypatch
) -> None:
    """The reported case: ``timeout_s = 5, max_retries = 1`` (here 1 s) received 6 requests and said 2."""
    monkeypatch.setenv("CLONEMEM_TEST_KEY", SECRET)
    sink = MemorySink()
    with FakeAPIServer(flavor) as server:
        server.stuck = True
        model = stuck_model(server, sink, timeout_s=1, max_retries=1)
        started = time.monotonic()
        with pytest.raises(ProviderUnresponsive) as err:  # no reply at all: the run would stop
            ask(model)
        took = time.monotonic() - started
        assert len(server.seen) == 2, [s.path for s in server.seen]
    message = str(err.value)
    assert "gave up after 2 attempts in " in message and "(max_retries = 1)" in message, message
    assert SECRET not in message
    assert 2 <= took < 2 + 3, took  # two attempts of 1 s and a 0.1 s wait
    [rec] = sink.records
    assert (rec.attempts, rec.outcome, rec.error_class) == (2, "permanent_error", "unresponsive")
    attempts = rec.attempt_list()
    assert [(a.n, a.outcome, a.error_class) for a in attempts] == [
        (1, "transient_error", "timeout"),
        (2, "transient_error", "timeout"),
    ]
    assert all(0.9 <= a.latency_ms / 1000 < 2 for a in attempts), [a.latency_ms for a in attempts]
    assert abs(rec.latency_ms / 1000 - took) < 1


def test_the_call_deadline_bounds_the_whole_call(monkeypatch) -> None:
    monkeypatch.setenv("CLONEMEM_TEST_KEY", SECRET)
    with FakeAPIServer("openai") as server:
        server.stuck = True
        model = stuck_model(server, timeout_s=1, max_retries=20, call_deadline_s=3)
        started = time.monotonic()
        with pytest.raises(ProviderUnresponsive) as err:
            ask(model)
        took = time.monotonic() - started
        seen = len(server.seen)
    assert took < 3.5, took  # the last attempt is cut short at the deadline
    assert seen == 3  # 1 s, 1 s, then what was left of 3 s
    assert "gave up after 3 attempts in 3." in str(err.value) and "(call deadline 3 s)" in str(
        err.value
    )


def test_the_default_deadline_is_a_few_timeouts() -> None:
    cfg = RunConfig.model_validate({"providers": {"openai": {"timeout_s": 7}}})
    assert cfg.providers.openai.deadline_s == 21
    assert RunConfig().providers.openai.deadline_s == 360  # 120 s a attempt
    cfg = RunConfig.model_validate(
        {"providers": {"openai": {"timeout_s": 7, "call_deadline_s": 9}}}
    )
    assert cfg.providers.openai.deadline_s == 9


def test_every_attempt_lands_with_its_error_class(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("CLONEMEM_TEST_KEY", SECRET)
    sink = MemorySink()
    with FakeAPIServer("anthropic") as server:
        server.push(
            server.flavor.error(500, "internal"),
            server.flavor.error(429, "slow down"),
            server.flavor.ok("not json at all", "test-model"),
            server.flavor.ok(GOOD, "test-model"),
        )
        model = stuck_model(server, sink, timeout_s=5, max_retries=3)
        assert ask(model).verdict == "sufficient"
    with Warehouse.open_writer(tmp_path / "wh.duckdb") as wh:
        land_calls(wh, sink)
        rows = wh.rows(
            "SELECT attempt, outcome, error_class FROM v_llm_call_attempts ORDER BY attempt"
        )
        call = wh.rows("SELECT attempts, outcome, error_class FROM llm_calls")
    assert rows == [
        (1, "transient_error", "server_error"),
        (2, "transient_error", "rate_limited"),
        (3, "invalid_output", "invalid_output"),
        (4, "ok", None),
    ]
    assert call == [(4, "ok", None)]


def test_a_provider_that_stopped_answering_stops_the_runs_other_calls(monkeypatch) -> None:
    """One call spends its budget without a reply while no other call got one: it ends with
    ProviderUnresponsive (which stops a run), and the calls in flight or waiting end at once."""
    monkeypatch.setenv("CLONEMEM_TEST_KEY", SECRET)
    health = ProviderHealth()
    with FakeAPIServer("openai") as server:
        server.stuck = True
        first = stuck_model(server, health=health, timeout_s=1, max_retries=1)
        late = stuck_model(
            server, health=health, timeout_s=60, max_retries=5
        )  # another role, same provider
        errors: list[BaseException] = []

        def call_late() -> None:
            try:
                ask(late)
            except BaseException as exc:
                errors.append(exc)

        started = time.monotonic()
        waiting = threading.Thread(target=call_late)
        waiting.start()
        with pytest.raises(ProviderUnresponsive) as err:
            ask(first)
        waiting.join(10)
        took = time.monotonic() - started
        assert not waiting.is_alive()
        with pytest.raises(ProviderUnresponsive):  # a later call sends nothing
            ask(stuck_model(server, health=health))
        assert len(server.seen) == 3  # two of the first call, one of the late call (abandoned)
    assert took < 5, took  # not the late call's 60 s attempt
    assert isinstance(errors[0], ProviderUnresponsive)
    assert str(err.value).startswith(
        "validator openai/test-model is not answering: gave up after 2 attempts in "
    )


def test_a_reply_elsewhere_keeps_a_failed_call_a_failure_of_its_own(monkeypatch) -> None:
    """A provider that answers other calls is not down: a call that timed out fails alone (CallFailed)."""
    monkeypatch.setenv("CLONEMEM_TEST_KEY", SECRET)
    health = ProviderHealth()
    with FakeAPIServer("openai") as server:
        server.stuck = True
        model = stuck_model(server, health=health, timeout_s=1, max_retries=1)
        threading.Timer(
            0.5, health.replied
        ).start()  # another call of the run got its reply meanwhile
        with pytest.raises(CallFailed) as err:
            ask(model)
    assert not isinstance(err.value, ProviderUnresponsive) and health.gave_up is None
