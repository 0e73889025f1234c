"""A run whose provider stops answering ends within a stated bound (issue 31, item 1; the README's
"Bounded failure" table): the generator bound to an OpenAI-compatible loopback server that reads every
request and never replies. One call makes at most ``1 + max_retries`` requests (before: the step's own
retries on top, 6 requests for ``max_retries = 1``), the run stops after one call's budget with one line
naming the role, the attempts and the time, both run rows are ``failed``, and the failed call is in
``llm_calls`` with each attempt and its error class, owned by its run.

The quick variant runs the pipeline in this process with small settings; the slow one runs the real
CLI with the default settings (120 s an attempt, 5 retries, a 360 s call deadline) and measures the
bound the README states: the run ends within ``call_deadline_s`` + 60 s of its first request."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from clonemem.llm.types import ProviderUnresponsive
from clonemem.schemas.config import RunConfig
from clonemem.warehouse import Warehouse
from tests.fakeapi import FakeAPIServer
from tests.pipeline_kit import TINY, clonemem
from tests.test_providers_http import SECRET

# what a run takes beyond one call's deadline to stop: the calls in flight abandoned, the rows written
STOP_MARGIN_S = 60.0


def stuck_config(folder: Path, server: FakeAPIServer, settings: str = "") -> Path:
    path = folder / "stuck.toml"
    path.write_text(
        TINY.replace("{personas}", "2")
        + f"""
[models]
generator = "openai/test-model"
[providers.openai]
base_url = "{server.base_url}"
api_key_env = "CLONEMEM_TEST_KEY"
{settings}
""",
        "utf-8",
    )
    return path


def check_warehouse(wh: Path, attempts: int) -> str:
    """The run rows and the ledger after the stop; the generate run's error line."""
    with Warehouse.open_reader(wh) as r:
        runs = dict(r.rows("SELECT kind, status FROM runs"))
        assert runs == {"generate": "failed", "pipeline": "failed"}, runs
        error = r.scalar("SELECT error FROM runs WHERE kind = 'generate'")
        calls = r.rows(
            "SELECT attempts, outcome, error_class FROM llm_calls WHERE provider = 'openai'"
        )
        assert calls and all(c[0] <= attempts for c in calls), calls
        assert ("permanent_error", "unresponsive") in {c[1:] for c in calls}, calls
        tries = r.rows(
            "SELECT DISTINCT outcome, error_class FROM v_llm_call_attempts WHERE provider = 'openai'"
        )
        assert set(tries) <= {
            ("transient_error", "timeout"),
            ("transient_error", "unresponsive"),
        }, tries
        assert r.scalar(
            "SELECT count(*) FROM v_llm_call_attempts WHERE provider = 'openai'"
        ) == sum(c[0] for c in calls)
        # every call is owned by the run that made it
        assert r.scalar(
            "SELECT count(*) FROM llm_calls c JOIN runs USING (run_id) WHERE kind = 'generate'"
        ) == len(calls)
        assert (
            r.scalar("SELECT count(*) FROM llm_calls WHERE run_id NOT IN (SELECT run_id FROM runs)")
            == 0
        )
    return str(error)


def requests_per_call(server: FakeAPIServer) -> dict[str, int]:
    """Requests by what they asked (a call's attempts send the same messages)."""
    counts: dict[str, int] = {}
    for seen in server.seen:
        key = repr(seen.body.get("messages")) if isinstance(seen.body, dict) else repr(seen.body)
        counts[key] = counts.get(key, 0) + 1
    return counts


@pytest.mark.prefect
@pytest.mark.timeout(600)
def test_a_stuck_provider_stops_the_run_after_one_calls_budget(tmp_path: Path, monkeypatch) -> None:
    from clonemem.flows.pipeline import pipeline_flow

    monkeypatch.setenv("CLONEMEM_TEST_KEY", SECRET)
    wh = tmp_path / "wh.duckdb"
    with FakeAPIServer("openai") as server:
        server.stuck = True
        cfg = stuck_config(
            tmp_path, server, "timeout_s = 1\nmax_retries = 1\nbackoff_base_s = 0.1\n"
        )
        started = time.monotonic()
        with pytest.raises(ProviderUnresponsive) as err:
            pipeline_flow(str(wh), str(cfg), evaluate=False)
        ended = time.monotonic()
        took = ended - min(s.at for s in server.seen)  # Prefect's own start is not the provider's
        per_call = requests_per_call(server)
    message = str(err.value)
    print(
        f"ended {ended - started:.1f} s after the flow started, {took:.1f} s after its first request; "
        f"requests per call: {sorted(per_call.values())}"
    )
    assert per_call and max(per_call.values()) == 2, per_call  # 1 + max_retries; was 6
    said = re.match(
        r"generator openai/test-model is not answering: gave up after 2 attempts in (\d+\.\d) s ",
        message,
    )
    # two attempts of 1 s and a 0.1 s wait, in the message
    assert said and 2 * 1 <= float(said[1]) < 2 * 1 + 1, message
    assert "(max_retries = 1)" in message and SECRET not in message and "\n" not in message
    assert took < 2 * 1 + 0.1 + STOP_MARGIN_S, took
    assert check_warehouse(wh, 2) == message


@pytest.mark.slow
@pytest.mark.timing
@pytest.mark.timeout(900)
def test_with_the_default_settings_a_stuck_provider_ends_the_run_within_the_readme_bound(
    tmp_path: Path,
) -> None:
    deadline = RunConfig().providers.openai.deadline_s  # 3 x 120 s
    wh, home = tmp_path / "wh.duckdb", tmp_path / "home"
    with FakeAPIServer("openai") as server:
        server.stuck = True
        cfg = stuck_config(tmp_path, server)  # the default timeout, retries, backoff and deadline
        started = time.monotonic()
        done = clonemem(
            wh,
            home,
            "generate",
            "--config",
            str(cfg),
            timeout=deadline + 300,
            CLONEMEM_TEST_KEY=SECRET,
        )
        ended = time.monotonic()
        first = min(s.at for s in server.seen)
        per_call = requests_per_call(server)
    print(
        f"exit {done.returncode} {ended - started:.1f} s after the command started, {ended - first:.1f} s after "
        f"its first request; requests per call: {sorted(per_call.values())}"
    )
    assert done.returncode == 1, done.stderr[-2000:]
    lines = [line for line in done.stderr.splitlines() if "not answering" in line]
    assert lines and "generator openai/test-model is not answering: gave up after" in lines[0], (
        done.stderr[-2000:]
    )
    assert max(per_call.values()) <= 1 + 5, per_call
    assert ended - first < deadline + STOP_MARGIN_S, ended - first
    check_warehouse(wh, 6)


@pytest.mark.prefect
@pytest.mark.timeout(600)
def test_a_stuck_answerer_stops_an_evaluation_with_its_calls_on_record(
    tmp_path: Path, monkeypatch
) -> None:
    """Evaluation alike: the answerer's provider never answers; the evaluation stops after one call's
    budget, its row in ``runs`` says ``failed`` and its calls are in ``llm_calls``, owned by it (before, a
    failed evaluation left no trace of what it spent)."""
    from clonemem.demo import fixture_files
    from clonemem.flows.evaluation import evaluate_flow
    from clonemem.importers import import_files

    monkeypatch.setenv("CLONEMEM_TEST_KEY", SECRET)
    wh = tmp_path / "wh.duckdb"
    with Warehouse.open_writer(wh) as w:
        import_files(w, "release", fixture_files(), "imported")
    with FakeAPIServer("openai") as server:
        server.stuck = True
        cfg = RunConfig.model_validate(
            {
                "models": {"answerer": "openai/test-model"},
                "providers": {
                    "openai": {
                        "base_url": server.base_url,
                        "api_key_env": "CLONEMEM_TEST_KEY",
                        "timeout_s": 1,
                        "max_retries": 1,
                        "backoff_base_s": 0.1,
                    }
                },
            }
        )
        with pytest.raises(ProviderUnresponsive) as err:
            # forced: the gate is not what this is about (it would cost seconds of Great Expectations)
            evaluate_flow(str(wh), "imported", ["bm25"], [5], force=True, config=cfg)
        took = time.monotonic() - min(s.at for s in server.seen)
        per_call = requests_per_call(server)
    assert max(per_call.values()) == 2 and took < 2 * 1 + 0.1 + STOP_MARGIN_S, (per_call, took)
    assert str(err.value).startswith(
        "answerer openai/test-model is not answering: gave up after 2 attempts in "
    )
    with Warehouse.open_reader(wh) as r:
        [(run_id, status, error)] = r.rows(
            "SELECT run_id, status, error FROM runs WHERE kind = 'evaluate'"
        )
        assert status == "failed" and error == str(err.value)
        assert r.scalar("SELECT count(*) FROM eval_runs") == 0  # nothing of its results
        calls = r.rows(
            "SELECT run_id, attempts, error_class FROM llm_calls WHERE provider = 'openai'"
        )
    assert (
        calls and {c[0] for c in calls} == {run_id} and ("unresponsive" in {c[2] for c in calls})
    ), calls
