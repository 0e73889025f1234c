"""Generation across workers: persona bundles at fsspec URLs, landed in one
transaction; and, on a real Prefect server with two process workers on one pool, the `pipeline`
deployment with ``distribute: true`` generating a 4-persona benchmark identical to the single-process
run, also when a worker is killed mid-run and the run is repeated.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from pathlib import Path

import pytest

from tests.pipeline_kit import content, start, tiny_config


@pytest.mark.prefect
def test_bundles_through_fsspec_land_like_in_process_generation(tmp_path: Path) -> None:
    """Two personas generated one by one into memory:// bundles and landed together equal in-process generation."""
    import fsspec

    from clonemem.flows.generation import generate_persona_flow, run_generation
    from clonemem.generation.bundle import read_bundle
    from clonemem.generation.land import land_bundle_files
    from clonemem.schemas.config import load_config
    from clonemem.warehouse import Warehouse

    cfg = load_config(tiny_config(tmp_path, "fs", personas=2))
    urls = [f"memory://clonemem-test/{tmp_path.name}/fs/persona-{i}.json" for i in range(2)]
    for i, url in enumerate(urls):
        out = generate_persona_flow(i, url, cfg)
        assert out.bundle == url and out.persona_id
    assert fsspec.filesystem("memory").exists(urls[0].removeprefix("memory://"))
    bundles = [read_bundle(u) for u in urls]
    assert all(b.content_hash and b.calls and b.persona_key for b in bundles)
    run_generation(cfg, str(tmp_path / "in-process.duckdb"))
    with Warehouse.open_writer(tmp_path / "bundles.duckdb") as wh:
        assert land_bundle_files(wh, urls) == [(u, True) for u in urls]
        # one transaction wrote the benchmark row, both personas and the calls they paid for
        assert wh.scalar("SELECT count(*) FROM llm_calls") == sum(len(b.calls) for b in bundles)
    assert content(tmp_path / "bundles.duckdb") == content(tmp_path / "in-process.duckdb")
    before = (tmp_path / "bundles.duckdb").read_bytes()
    with Warehouse.open_writer(tmp_path / "bundles.duckdb") as wh:
        assert land_bundle_files(wh, urls) == [
            (u, False) for u in urls
        ]  # idempotent: nothing rewritten
    assert (tmp_path / "bundles.duckdb").read_bytes() == before


def test_a_damaged_bundle_lands_nothing(tmp_path: Path) -> None:
    """Every bundle is read and checked before the transaction: one bad bundle, no persona lands."""
    import fsspec

    from clonemem.generation.land import land_bundle_files
    from clonemem.warehouse import Warehouse

    good = {
        "format": 1,
        "benchmark": {
            "benchmark_id": "b",
            "name": "n",
            "source": "generated",
            "is_offline": True,
            "language": "en",
            "config_json": "{}",
            "gate_status": "pending",
            "status": "incomplete",
        },
        "persona_key": "p00",
        "persona_id": "p",
        "tables": {"personas": [{"persona_id": "p"}]},
        "content_hash": "0" * 32,
        "failures": [],
        "dropped": [],
        "calls": [],
        "run_id": None,
    }
    url = f"memory://clonemem-test/{tmp_path.name}/bad.json"
    with fsspec.open(url, "w") as fh:
        json.dump(good, fh)
    with Warehouse.open_writer(tmp_path / "wh.duckdb") as wh:
        with pytest.raises(
            ValueError, match=r"bad.json: the rows do not match the bundle's content hash"
        ):
            land_bundle_files(wh, [url])
        with pytest.raises(ValueError, match=r"missing.json: no such bundle"):
            land_bundle_files(wh, [str(tmp_path / "missing.json")])
        assert wh.scalar("SELECT count(*) FROM benchmarks") == 0


@pytest.mark.prefect
def test_distributing_without_the_persona_deployment_names_the_parameter(tmp_path: Path) -> None:
    from clonemem.flows.scaleout import PersonaRunsFailed, generate_distributed_flow

    with pytest.raises(
        PersonaRunsFailed,
        match=r"flow parameter `persona_deployment`: no deployment "
        r"'generate-persona/generate-persona' on the Prefect server",
    ):
        generate_distributed_flow(str(tmp_path / "wh.duckdb"), str(tiny_config(tmp_path)))
    assert not (tmp_path / "wh.duckdb").exists()


# -- on a real server with two workers ------------------------------------------------------------------


@pytest.mark.prefect_server
@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_two_workers_generate_the_single_process_benchmark_and_survive_a_killed_worker(
    tmp_path: Path,
) -> None:
    from clonemem.warehouse import Warehouse
    from tests.prefect_server_kit import Stack

    # 150 ms per simulated LLM call: a persona runs for several seconds, long enough to be killed mid-run
    config = tiny_config(tmp_path, "wide", personas=4, latency_ms=150)
    # the reference: `clonemem generate` in one process, with a Prefect home (and cache) of its own
    single_wh = tmp_path / "single.duckdb"
    single = start(single_wh, tmp_path / "single-home", "generate", "--config", str(config))
    stack = Stack(tmp_path, tmp_path / "wh.duckdb")
    try:
        stack.start_server()
        stack.cli("prefect", "work-pool", "create", "clonemem", "--type", "process")
        stack.cli(
            "prefect", "--no-prompt", "deploy", "--name", "pipeline", "--name", "generate-persona"
        )
        # --limit 2: the worker running the orchestrating flow run has one slot left for personas, so it works
        # through them one at a time while the other takes two at once (a larger limit let one take them all)
        for name in ("w1", "w2"):
            stack.start_worker(name, "--limit", "2")
        persona_deployment = stack.deployment("generate-persona/generate-persona")["id"]
        params = {
            "config": str(config),
            "distribute": True,
            "evaluate": False,
            "bundle_location": (tmp_path / "bundles").as_uri(),
        }  # an fsspec URL (file://)

        # 1. a run whose orchestrating worker is killed (SIGKILL, process group) while personas are generated
        first = stack.run_deployment("pipeline/pipeline", params)
        stack.wait(first, 300, states={"RUNNING"})
        seen: dict[str, str] = {}  # persona run -> the worker seen running it
        deadline = time.monotonic() + 300
        while True:
            hosts = stack.hosts()
            running = stack.flow_runs(
                deployment_id={"any_": [persona_deployment]}, state={"type": {"any_": ["RUNNING"]}}
            )
            now = {r["id"]: hosts[r["id"]] for r in running if r["id"] in hosts}
            seen.update(now)
            orchestrator_host = hosts.get(first)
            if (
                orchestrator_host
                and orchestrator_host in now.values()
                and set(seen.values()) == {"w1", "w2"}
            ):
                break  # both workers took personas; the orchestrating run's worker is generating one now
            assert time.monotonic() < deadline, (
                orchestrator_host,
                seen,
                stack.tail("w1"),
                stack.tail("w2"),
            )
            time.sleep(0.2)
        killed_at = dt.datetime.now(dt.UTC)
        stack.kill(orchestrator_host)
        # nothing landed yet (the orchestrating run writes the warehouse only when every persona is done)
        assert not stack.warehouse.exists(), "killed after landing: the test came too late"
        survivor = ({"w1", "w2"} - {orchestrator_host}).pop()
        # the survivor's persona runs of the lost attempt finish (their bundles are not used by anyone)
        for run_id, host in seen.items():
            if host == survivor:
                assert stack.wait(run_id, 300)["state"]["type"] == "COMPLETED"

        # 2. the same run again, with the lost worker back: completes from the cache where it can
        stack.start_worker(orchestrator_host, "--limit", "2")
        second = stack.run_deployment("pipeline/pipeline", params)
        run = stack.wait(second, 600)
        assert run["state"]["type"] == "COMPLETED", (
            run["state"],
            stack.tail("w1"),
            stack.tail("w2"),
        )
        # the lost attempt really died mid-run: its orchestrating run never finished, nor did any of its
        # personas on the killed worker that had not finished before the kill (the server still shows them
        # running: nothing marks a lost run without heartbeats); one seen earlier may have finished before it
        assert stack.flow_run(first)["state"]["type"] == "RUNNING"
        for run_id in [r for r, host in seen.items() if host == orchestrator_host]:
            got = stack.flow_run(run_id)
            ended = got["end_time"] and dt.datetime.fromisoformat(
                got["end_time"].replace("Z", "+00:00")
            )
            assert got["state"]["type"] == "RUNNING" or (
                got["state"]["type"] == "COMPLETED" and ended <= killed_at
            ), got
        # every persona run of both attempts (a persona's calls may come from either: tasks cached by the lost
        # attempt's survivor, the rest run anew)
        persona_runs = {
            r["id"] for r in stack.flow_runs(deployment_id={"any_": [persona_deployment]})
        }
        assert single.wait(timeout=600) == 0, single.stderr.read()
    finally:
        stack.stop_all()
        if single.poll() is None:
            single.kill()
            single.wait()

    # the same benchmark as the single-process run: ids, counts, texts, questions, gate verdict
    assert content(stack.warehouse) == content(single_wh)
    with Warehouse.open_reader(stack.warehouse) as dist, Warehouse.open_reader(single_wh) as one:
        assert dist.scalar("SELECT count(*) FROM personas") == 4
        calls = "SELECT stage, count(*) FROM llm_calls GROUP BY stage ORDER BY stage"
        assert dist.rows(calls) == one.rows(calls)  # no call landed twice, none lost
        # one stage-IV and one pipeline run; generation: the orchestrating run's row, plus a row for each
        # persona run (of either attempt) whose calls landed (every call has a run that exists)
        kinds = dict(dist.rows("SELECT kind, count(*) FROM runs GROUP BY kind"))
        assert (
            kinds.pop("pipeline") == 1
            and kinds.pop("qa") == 1
            and kinds.pop("generate") >= 2
            and not kinds
        )
        generate_runs = [
            row[0] for row in dist.rows("SELECT run_id FROM runs WHERE kind = 'generate'")
        ]
        assert len([run_id for run_id in generate_runs if run_id not in persona_runs]) == 1, (
            generate_runs,
            persona_runs,
        )
        assert (
            dist.scalar(
                "SELECT count(*) FROM llm_calls c WHERE NOT EXISTS "
                "(SELECT 1 FROM runs r WHERE r.run_id = c.run_id)"
            )
            == 0
        )
        assert dist.scalar("SELECT flow_run_id FROM runs WHERE kind = 'pipeline'") == second
