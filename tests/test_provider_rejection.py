"""A provider that refuses the key, the permission, the model or the request stops the run at once:
one line naming role, provider, model and the key variable (never the key), exit 1, nothing landed
of the failing stage, the run's row `failed`. And no benchmark passes the gate without questions or
on calls that mostly failed.

Each scenario runs the real CLI (in this process, so Prefect starts once) on a tiny one-persona config
with one role bound to an OpenAI-compatible loopback server that answers every request with the
status under test; the other roles stay offline."""

from __future__ import annotations

from pathlib import Path

import pytest

from clonemem.llm.model import MemorySink
from clonemem.llm.types import ProviderRejected
from clonemem.warehouse import Warehouse
from tests.fakeapi import FakeAPIServer
from tests.pipeline_kit import TINY
from tests.shared_kit import copy_warehouse
from tests.test_providers_http import FLAVORS, SECRET, ask, model_for

pytestmark = [pytest.mark.prefect, pytest.mark.timeout(900)]

STATUSES = {
    401: "authentication failed (HTTP 401)",
    403: "permission denied (HTTP 403)",
    404: "model not found (HTTP 404)",
    400: "request rejected (HTTP 400)",
}


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
        with pytest.raises(
            ProviderRejected
        ) as second:  # the role's next step (its own recorder) sends nothing
            ask(model.recording_to(MemorySink()))
    message = str(first.value)
    assert message.startswith(f"validator {flavor}/test-model: {STATUSES[status]}"), message
    assert "$CLONEMEM_TEST_KEY" in message and SECRET not in message
    assert str(second.value) == message
    assert len(server.seen) == 1


# -- through the pipeline ------------------------------------------------------------------------------
# In this process the flows are called as `clonemem generate` / `evaluate` call them (the CLI maps the
# error to its one line and exit 1: `exit_code_for`, and the real CLI is run by the slow tests below).


def refused_config(folder: Path, role: str, server: FakeAPIServer, name: str) -> Path:
    path = folder / f"{name}.toml"
    path.write_text(
        TINY.replace('name = "tiny"', f'name = "{name}"').replace("{personas}", "1")
        + f"""
[models]
{role} = "openai/test-model"
[providers.openai]
base_url = "{server.base_url}"
api_key_env = "CLONEMEM_TEST_KEY"
max_concurrency = 1
""",
        "utf-8",
    )
    return path


def runs(wh: Path) -> dict[str, tuple]:
    with Warehouse.open_reader(wh) as r:
        return {
            kind: (status, error)
            for kind, status, error in r.rows(
                "SELECT kind, status, error FROM runs ORDER BY started_at"
            )
        }


def in_flight() -> int:
    """Requests that may be in flight at once in this process: the provider's concurrency limit is one
    semaphore per process, sized by the first config that used it (1 in a fresh `clonemem` process)."""
    from clonemem.llm.model import _LIMITERS

    return _LIMITERS["openai"]._initial_value


GENERATION_ROLES = {"generator": "generate", "qa_writer": "qa", "validator": "qa"}


def _refused_generate(
    tmp_path: Path, role: str, status: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from clonemem.errors import ExitCode, exit_code_for, user_errors
    from clonemem.flows.pipeline import pipeline_flow

    monkeypatch.setenv("CLONEMEM_TEST_KEY", SECRET)
    wh = tmp_path / "wh.duckdb"
    with FakeAPIServer("openai") as server:
        server.always = server.flavor.error(status, f"refused, key {SECRET}")
        cfg = refused_config(tmp_path, role, server, f"refused-{role}-{status}")
        with pytest.raises(ProviderRejected) as err:
            pipeline_flow(str(wh), str(cfg), evaluate=False)
    message = str(err.value)
    assert message.startswith(f"{role} openai/test-model: {STATUSES[status]}"), message
    assert "$CLONEMEM_TEST_KEY" in message and SECRET not in message and "\n" not in message
    assert (
        isinstance(err.value, user_errors()) and exit_code_for(err.value) == ExitCode.ERROR
    )  # its line, exit 1
    assert (
        len(server.seen) <= in_flight()
    )  # stopped at once: no request after the refusal but those in flight
    # the stage that met the refusal failed, with its reason; nothing reached the gate
    status_of = runs(wh)
    assert status_of[GENERATION_ROLES[role]] == ("failed", message)
    assert status_of["pipeline"] == ("failed", message)
    with Warehouse.open_reader(wh) as r:
        assert r.rows("SELECT gate_status, status FROM benchmarks") in (
            [],
            [("pending", "incomplete")],
        )
        assert r.scalar("SELECT count(*) FROM questions") == 0
        assert r.scalar("SELECT count(*) FROM gate_runs") == 0
        # every landed call has a run that exists
        assert (
            r.scalar("SELECT count(*) FROM llm_calls WHERE run_id NOT IN (SELECT run_id FROM runs)")
            == 0
        )


def test_a_rejected_validator_key_stops_generate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reported case: `validator = "openai/gpt-4o-mini"` against an endpoint answering 401."""
    _refused_generate(tmp_path, "validator", 401, monkeypatch)


def test_a_refused_generator_stops_generation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _refused_generate(tmp_path, "generator", 403, monkeypatch)


@pytest.mark.slow
@pytest.mark.parametrize("status", sorted(STATUSES))
@pytest.mark.parametrize("role", sorted(GENERATION_ROLES))
def test_every_generation_role_and_refusal_stops_generate(
    tmp_path: Path, role: str, status: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    _refused_generate(tmp_path, role, status, monkeypatch)


@pytest.mark.slow
def test_the_real_cli_prints_the_one_line_and_exits_1(tmp_path: Path) -> None:
    from tests.pipeline_kit import clonemem

    wh, home = tmp_path / "wh.duckdb", tmp_path / "home"
    with FakeAPIServer("openai") as server:
        server.always = server.flavor.error(401, f"invalid key {SECRET}")
        cfg = refused_config(tmp_path, "validator", server, "refused")
        got = clonemem(wh, home, "generate", "--config", str(cfg), CLONEMEM_TEST_KEY=SECRET)
        assert got.returncode == 1, got.stderr
        assert (
            len(server.seen) == 1
        )  # a fresh process, concurrency 1: the refused model got one request
        line = "error: validator openai/test-model: authentication failed (HTTP 401); check the API key in $CLONEMEM_TEST_KEY"
        assert [x for x in got.stderr.splitlines() if not x.startswith("  ")] == [
            line
        ]  # (progress lines aside)
        assert got.stdout == ""
        # evaluation roles: the same line and exit 1 (not a memory system's failure, exit 5)
        offline = tmp_path / "offline.toml"
        offline.write_text(TINY.replace("{personas}", "1"), "utf-8")
        assert clonemem(wh, home, "generate", "--config", str(offline)).returncode == 0
        answerer = refused_config(tmp_path, "answerer", server, "tiny")
        got = clonemem(
            wh,
            home,
            "evaluate",
            "tiny",
            "--systems",
            "bm25",
            "--k",
            "5",
            "--config",
            str(answerer),
            CLONEMEM_TEST_KEY=SECRET,
        )
    assert got.returncode == 1, got.stderr
    assert [x for x in got.stderr.splitlines() if not x.startswith("  ")] == [
        line.replace("validator", "answerer")
    ]


# -- evaluation roles ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gated(tmp_path_factory: pytest.TempPathFactory, tiny_gated_once: Path) -> Path:
    """A tiny benchmark generated offline and passed by the gate (evaluated by the tests below)."""
    return copy_warehouse(tiny_gated_once, tmp_path_factory.mktemp("gated") / "wh.duckdb")


EVAL_ROLES = {"answerer": "bm25", "judge": "bm25", "extractor": "mem0"}


@pytest.mark.parametrize(
    "role",
    [
        pytest.param(r, marks=[] if r == "answerer" else [pytest.mark.slow])
        for r in sorted(EVAL_ROLES)
    ],
)
def test_a_refused_evaluation_role_stops_evaluate(
    gated: Path, tmp_path: Path, role: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from clonemem.flows.evaluation import evaluate_flow

    monkeypatch.setenv("CLONEMEM_TEST_KEY", SECRET)
    with FakeAPIServer("openai") as server:
        server.always = server.flavor.error(401, "bad key")
        cfg = refused_config(tmp_path, role, server, "tiny")
        with pytest.raises(ProviderRejected) as err:
            evaluate_flow(str(gated), "tiny", [EVAL_ROLES[role]], [5], config=str(cfg))
    assert str(err.value) == (
        f"{role} openai/test-model: authentication failed (HTTP 401); "
        "check the API key in $CLONEMEM_TEST_KEY"
    )
    assert len(server.seen) <= in_flight()
    with Warehouse.open_reader(gated) as r:
        assert r.scalar("SELECT count(*) FROM eval_runs") == 0  # nothing of the evaluation landed


# -- the gate: no benchmark passes without questions or on failed calls ----------------------------------


def _gate_on_a_copy(gated: Path, folder: Path, change: str) -> list[str]:
    """The gate's unmet expectations on a copy of the gated benchmark after ``change`` (SQL)."""
    from clonemem.expectations.gate import run_gate

    folder.mkdir()
    wh = folder / "wh.duckdb"
    wh.write_bytes(gated.read_bytes())
    with Warehouse.open_writer(wh) as w:
        w.execute(change)
    result = run_gate(wh, "tiny")  # with the bounds of the benchmark's own config
    with Warehouse.open_reader(wh) as r:
        assert r.scalar("SELECT gate_status FROM benchmarks") == (
            "failed" if result.failed else "passed"
        )
    return [o.expectation for o in result.failed]


def test_gate_fails_a_benchmark_without_questions(gated: Path, tmp_path: Path) -> None:
    """The reported case: a benchmark with no accepted question was stored as passed."""
    assert _gate_on_a_copy(
        gated,
        tmp_path / "empty",
        "DELETE FROM question_choices; DELETE FROM question_evidence; "
        "DELETE FROM question_traces; DELETE FROM questions",
    ) == [
        "every persona has its minimum of accepted questions",
        "every question type asked for has its minimum of accepted questions",
    ]


# Six failed calls of a generation run of the benchmark: the fixture's own calls may be absent (a step
# the session's cache served records no call), so the test adds the failures it needs and fails the rest.
FAILED_CALLS = (
    "UPDATE llm_calls SET outcome = 'transient_error' WHERE stage = 'qa.sufficiency'; "
    "INSERT INTO llm_calls (call_id, run_id, stage, role, provider, model, is_offline, prompt_hash, "
    "input_tokens, output_tokens, latency_ms, attempts, outcome, error, started_at) "
    "SELECT 'failed-' || i, (SELECT min(run_id) FROM runs WHERE kind IN ('generate', 'qa')), "
    "'qa.sufficiency', 'validator', 'offline', 'validator', true, 'h', 0, 0, 0, 3, 'transient_error', "
    "'HTTP 500', now() FROM range(6) t(i)"
)


@pytest.mark.slow
def test_gate_fails_a_stage_whose_calls_failed(gated: Path, tmp_path: Path) -> None:
    assert _gate_on_a_copy(gated, tmp_path / "failed", FAILED_CALLS) == [
        "failed LLM calls per stage within bounds"
    ]
