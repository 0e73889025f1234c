"""A provider that refuses the key, the permission, the model or the request stops the run at once:
one line naming role, provider, model and the key variable (never the key), exit 1, nothing landed
of the failing stage, the run's row `failed`. And no benchmark passes the gate without questions or
on calls that mostly failed.

Each scenario runs the real CLI (in this process, so Prefect starts once) on a tiny one-persona config
with one role bound to an OpenAI-compatible loopback server that answers every request with the
status under test; the other roles stay offline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clonemem.cli import app
from clonemem.llm.model import MemorySink
from clonemem.llm.types import ProviderRejected
from clonemem.warehouse import Warehouse
from tests.fakeapi import FakeAPIServer
from tests.pipeline_kit import TINY
from tests.test_providers_http import FLAVORS, SECRET, ask, model_for

pytestmark = [pytest.mark.prefect, pytest.mark.timeout(900)]

runner = CliRunner()
STATUSES = {401: "authentication failed (HTTP 401)", 403: "permission denied (HTTP 403)",
            404: "model not found (HTTP 404)", 400: "request rejected (HTTP 400)"}


# -- the provider layer: every 4xx that is not worth retrying is a refusal, named by role ------------


@pytest.mark.parametrize("status", sorted(STATUSES))
@pytest.mark.parametrize("flavor", FLAVORS)
def test_a_refusal_is_one_request_then_no_more(flavor: str, status: int, monkeypatch) -> None:
    monkeypatch.setenv("CLONEMEM_TEST_KEY", SECRET)
    with FakeAPIServer(flavor) as server:
        server.always = server.flavor.error(status, f"no such thing for key {SECRET}")
        model = model_for(server)
        with pytest.raises(ProviderRejected) as first:
            ask(model)
        with pytest.raises(ProviderRejected) as second:  # the role's next step (its own recorder) sends nothing
            ask(model.recording_to(MemorySink()))
    message = str(first.value)
    assert message.startswith(f"validator {flavor}/test-model: {STATUSES[status]}"), message
    assert "$CLONEMEM_TEST_KEY" in message and SECRET not in message
    assert str(second.value) == message
    assert len(server.seen) == 1


# -- through the CLI ---------------------------------------------------------------------------------


def refused_config(folder: Path, role: str, server: FakeAPIServer, name: str) -> Path:
    path = folder / f"{name}.toml"
    path.write_text(TINY.replace('name = "tiny"', f'name = "{name}"').replace("{personas}", "1") + f"""
[models]
{role} = "openai/test-model"
[providers.openai]
base_url = "{server.base_url}"
api_key_env = "CLONEMEM_TEST_KEY"
max_concurrency = 1
""", "utf-8")
    return path


def cli(wh: Path, *args: str):
    return runner.invoke(app, ["--warehouse", str(wh), *args], env={"CLONEMEM_TEST_KEY": SECRET})


def errors(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("error:")]


def runs(wh: Path) -> dict[str, tuple]:
    with Warehouse.open_reader(wh) as r:
        return {kind: (status, error) for kind, status, error in r.rows(
            "SELECT kind, status, error FROM runs ORDER BY started_at")}


GENERATION_ROLES = {"generator": "generate", "qa_writer": "qa", "validator": "qa"}


def _refused_generate(tmp_path: Path, role: str, status: int) -> None:
    wh = tmp_path / "wh.duckdb"
    with FakeAPIServer("openai") as server:
        server.always = server.flavor.error(status, f"refused, key {SECRET}")
        got = cli(wh, "generate", "--config", str(refused_config(tmp_path, role, server, f"refused-{role}-{status}")))
    out = got.output
    assert got.exit_code == 1, out
    lines = errors(out)
    assert lines == [f"error: {role} openai/test-model: {STATUSES[status]}" + lines[0].split(STATUSES[status], 1)[1]], out
    assert "$CLONEMEM_TEST_KEY" in lines[0] and SECRET not in out and "Traceback" not in out
    assert len(server.seen) == 1  # stopped at once: the refused model got one request
    # the stage that met the refusal failed, with its reason; nothing passed the gate
    status_of = runs(wh)
    assert status_of[GENERATION_ROLES[role]][0] == "failed" and STATUSES[status] in status_of[GENERATION_ROLES[role]][1]
    assert status_of["pipeline"][0] == "failed"
    listed = json.loads(cli(wh, "benchmarks", "--all", "--json").output)
    assert [(b["gate_status"], b["status"], b["questions"]) for b in listed] in ([], [("pending", "incomplete", 0)])
    with Warehouse.open_reader(wh) as r:
        assert r.scalar("SELECT count(*) FROM gate_runs") == 0
        # every landed call has a run that exists
        assert r.scalar("SELECT count(*) FROM llm_calls WHERE run_id NOT IN (SELECT run_id FROM runs)") == 0


def test_a_rejected_validator_key_stops_generate_with_one_line(tmp_path: Path) -> None:
    """The reported case: `validator = "openai/gpt-4o-mini"` against an endpoint answering 401."""
    _refused_generate(tmp_path, "validator", 401)


@pytest.mark.slow
@pytest.mark.parametrize("status", sorted(STATUSES))
@pytest.mark.parametrize("role", sorted(GENERATION_ROLES))
def test_every_generation_role_and_refusal_stops_generate(tmp_path: Path, role: str, status: int) -> None:
    _refused_generate(tmp_path, role, status)


def test_generator_refusal_is_quick_too(tmp_path: Path) -> None:
    _refused_generate(tmp_path, "generator", 403)


# -- evaluation roles ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny benchmark generated offline and passed by the gate (evaluated by the tests below)."""
    d = tmp_path_factory.mktemp("gated")
    cfg = d / "tiny.toml"
    cfg.write_text(TINY.replace("{personas}", "1"), "utf-8")
    got = cli(d / "wh.duckdb", "generate", "--config", str(cfg))
    assert got.exit_code == 0, got.output
    return d / "wh.duckdb"


EVAL_ROLES = {"answerer": "bm25", "judge": "bm25", "extractor": "mem0"}


@pytest.mark.parametrize("role", sorted(EVAL_ROLES))
def test_a_refused_evaluation_role_stops_evaluate_with_one_line(gated: Path, tmp_path: Path, role: str) -> None:
    with FakeAPIServer("openai") as server:
        server.always = server.flavor.error(401, "bad key")
        cfg = refused_config(tmp_path, role, server, "tiny")
        got = cli(gated, "evaluate", "tiny", "--systems", EVAL_ROLES[role], "--k", "5", "--config", str(cfg))
    assert got.exit_code == 1, got.output
    assert errors(got.output) == [f"error: {role} openai/test-model: authentication failed (HTTP 401); "
                                  "check the API key in $CLONEMEM_TEST_KEY"], got.output
    assert len(server.seen) == 1
    with Warehouse.open_reader(gated) as r:
        assert r.scalar("SELECT count(*) FROM eval_runs") == 0  # nothing of the evaluation landed


# -- the gate: no benchmark passes without questions or on failed calls ----------------------------------


def _gate_with(wh: Path, **bounds: object) -> list[str]:
    from clonemem.expectations.gate import GateFailed, run_gate
    from clonemem.schemas.config import GateConfig

    base = {"max_rejection_rate": 1.0, "heuristic_margin": 1.0, "media_mix_tolerance": 1.0}
    try:
        run_gate(wh, "tiny", GateConfig(**{**base, **bounds}))
    except GateFailed as exc:
        return [o.expectation for o in exc.result.failed]
    return []


def test_gate_requires_questions_per_persona_and_type_and_few_failed_calls(gated: Path, tmp_path: Path) -> None:
    wh = tmp_path / "copy.duckdb"
    wh.write_bytes(gated.read_bytes())
    assert _gate_with(wh) == []
    assert _gate_with(wh, min_questions_per_persona=10_000) == ["every persona has its minimum of accepted questions"]
    assert _gate_with(wh, min_questions_per_type=10_000) == [
        "every question type asked for has its minimum of accepted questions"]
    with Warehouse.open_writer(wh) as w:  # a stage whose calls failed after their retries
        w.execute("UPDATE llm_calls SET outcome = 'transient_error' WHERE stage = 'qa.sufficiency'")
    assert _gate_with(wh) == ["failed LLM calls per stage within bounds"]
    with Warehouse.open_writer(wh) as w:  # and the reported case: no question accepted at all
        w.execute("DELETE FROM question_choices; DELETE FROM question_evidence; DELETE FROM question_traces; "
                  "DELETE FROM questions")
        w.execute("UPDATE llm_calls SET outcome = 'ok'")
    assert _gate_with(wh) == ["every persona has its minimum of accepted questions",
                              "every question type asked for has its minimum of accepted questions"]
