"""The real anthropic, google-genai and openai SDKs against loopback servers speaking each wire format."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from pydantic import BaseModel

from clonemem import prompts
from clonemem.llm.model import MemorySink, get_model
from clonemem.llm.types import PermanentError
from clonemem.schemas.config import RunConfig
from clonemem.warehouse import Warehouse
from clonemem.warehouse.landing import Landing, land
from tests.fakeapi import FakeAPIServer

SECRET = "sk-test-7f3a9c1e5b2d4f6a8c0e"
FLAVORS = ["anthropic", "gemini", "openai"]


class Verdict(BaseModel):
    verdict: str
    score: float


GOOD = '{"verdict": "sufficient", "score": 0.9}'


@pytest.fixture(params=FLAVORS)
def server(request):
    with FakeAPIServer(request.param) as srv:
        yield srv


@pytest.fixture
def env_key(monkeypatch):
    monkeypatch.setenv("CLONEMEM_TEST_KEY", SECRET)


def model_for(server: FakeAPIServer, sink=None, sleeps=None):
    flavor = server.flavor.name
    config = RunConfig.model_validate(
        {
            "models": {"validator": f"{flavor}/test-model"},
            "providers": {
                flavor: {
                    "base_url": server.base_url,
                    "api_key_env": "CLONEMEM_TEST_KEY",
                    "max_retries": 3,
                    "max_validation_retries": 2,
                    "timeout_s": 10,
                }
            },
        }
    )
    return get_model(
        config,
        "validator",
        sink=sink,
        sleep=(sleeps.append if sleeps is not None else (lambda s: None)),
    )


def ask(model) -> Verdict:
    prompt = prompts.Prompt("t", "You judge evidence.", "Is the evidence sufficient?", "h")
    return model.structured(model.request("qa.sufficiency", prompt, schema=Verdict), Verdict)


def land_calls(wh: Warehouse, sink: MemorySink) -> None:
    """The calls a model recorded, written to the ledger as every flow writes them (the landing protocol)."""
    land(wh, Landing("no-benchmark", "persona", [], calls=sink.records))


def auth_header(server: FakeAPIServer) -> str:
    headers = server.seen[-1].headers
    return {
        "anthropic": headers.get("x-api-key", "") + headers.get("authorization", ""),
        "openai": headers.get("authorization", ""),
        "gemini": headers.get("x-goog-api-key", ""),
    }[server.flavor.name]


def test_structured_reply(server: FakeAPIServer, env_key) -> None:
    server.push(server.flavor.ok(GOOD, "test-model"))
    model = model_for(server)
    assert ask(model) == Verdict(verdict="sufficient", score=0.9)
    seen = server.seen[0]
    assert SECRET in auth_header(server)
    body = seen.body
    if server.flavor.name == "anthropic":
        assert seen.path == "/v1/messages"
        assert body["model"] == "test-model" and body["system"] == "You judge evidence."
        assert body["output_config"]["format"]["type"] == "json_schema"
    elif server.flavor.name == "openai":
        assert seen.path == "/v1/chat/completions"
        assert body["messages"][0] == {"role": "system", "content": "You judge evidence."}
        assert body["response_format"]["json_schema"]["name"] == "Verdict"
    else:
        assert seen.path.endswith("/models/test-model:generateContent")
        assert body["systemInstruction"]["parts"][0]["text"] == "You judge evidence."
        assert body["generationConfig"]["responseMimeType"] == "application/json"
    assert model.usage.input_tokens == 31 and model.usage.output_tokens == 9


def test_429_then_success_honours_retry_after(server: FakeAPIServer, env_key) -> None:
    limited = server.flavor.error(429, "slow down")
    limited.headers["retry-after"] = "0.25"
    server.push(limited, server.flavor.ok(GOOD, "test-model"))
    sleeps: list[float] = []
    model = model_for(server, sleeps=sleeps)
    assert ask(model).verdict == "sufficient"
    assert len(server.seen) == 2 and sleeps == [0.25]


def test_500_then_success(server: FakeAPIServer, env_key) -> None:
    server.push(server.flavor.error(500, "internal"), server.flavor.ok(GOOD, "test-model"))
    sleeps: list[float] = []
    assert ask(model_for(server, sleeps=sleeps)).score == 0.9
    assert len(server.seen) == 2 and len(sleeps) == 1


def test_malformed_json_then_corrected(server: FakeAPIServer, env_key) -> None:
    server.push(
        server.flavor.ok('{"verdict": "sufficient", "score": ', "test-model"),
        server.flavor.ok(GOOD, "test-model"),
    )
    model = model_for(server)
    assert ask(model).verdict == "sufficient"
    second = server.seen[1].body
    text = str(second)
    assert "could not be used" in text and "not valid JSON" in text
    assert model.usage.attempts == 2


def test_auth_error_fails_fast_without_leaking_the_key(
    server: FakeAPIServer, env_key, wh_path: Path, caplog
) -> None:
    caplog.set_level(logging.DEBUG)
    server.push(server.flavor.error(401, f"invalid x-api-key {SECRET}"))
    sink = MemorySink()
    with pytest.raises(PermanentError) as err:
        ask(model_for(server, sink=sink))
    with Warehouse.open_writer(wh_path) as wh:
        land_calls(wh, sink)
        rows = wh.rows("SELECT * FROM llm_calls")
    message = str(err.value)
    assert "authentication failed (HTTP 401)" in message and "$CLONEMEM_TEST_KEY" in message
    assert len(server.seen) == 1  # no retry
    assert SECRET not in message
    assert SECRET not in caplog.text
    assert len(rows) == 1 and SECRET not in repr(rows)
    assert "permanent_error" in rows[0]


def test_key_never_in_warehouse_after_success(
    server: FakeAPIServer, env_key, wh_path: Path
) -> None:
    server.push(server.flavor.ok(GOOD, "test-model"))
    sink = MemorySink()
    ask(model_for(server, sink=sink))
    with Warehouse.open_writer(wh_path) as wh:
        land_calls(wh, sink)
        dump = repr(wh.rows("SELECT * FROM llm_calls"))
    assert "test-model" in dump and SECRET not in dump
