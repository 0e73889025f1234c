"""Night after night on a real Prefect server (`prefect server start`, a process worker, the `pipeline`
deployment): a run, its cached re-run, a run that fails (its config is missing) and a run whose worker is
killed mid-run leave four visible pipeline runs with the right statuses on the Runs page (completed,
completed, failed with its error line, crashed), the cached re-run takes under 30 s, and the History page
shows the evaluation (the re-run's identical evaluation is not stored again)."""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path

import pytest

from tests.dashboard_kit import app, charts, frame, sql
from tests.pipeline_kit import tiny_config
from tests.prefect_server_kit import Stack

pytestmark = [
    pytest.mark.prefect_server,
    pytest.mark.slow,
    pytest.mark.timing,
    pytest.mark.timeout(1500),
]

EVALUATION = """[evaluation]
systems = ["oracle", "bm25"]
k = [5]
bootstrap_samples = 50
"""
CACHED_RERUN_S = 30  # the target for a cached nightly re-run


def _config(folder: Path, name: str, benchmark: str = "tiny", **offline: object) -> Path:
    path = tiny_config(folder, name, **offline)
    text = path.read_text("utf-8").replace('name = "tiny"', f'name = "{benchmark}"', 1)
    path.write_text(text + EVALUATION, "utf-8")  # after [providers.offline], its own table
    return path


def _seconds(run: dict) -> float:
    start, end = (
        dt.datetime.fromisoformat(run[k].replace("Z", "+00:00")) for k in ("start_time", "end_time")
    )
    return (end - start).total_seconds()


def _pipeline_row_status(wh: Path, run_id: str) -> str | None:
    from clonemem.warehouse import Warehouse

    if not wh.exists():
        return None
    with Warehouse.open_reader(wh) as r:  # a snapshot while the run writes
        return r.scalar("SELECT max(status) FROM runs WHERE run_id = ?", [run_id])


def test_four_nights_leave_four_visible_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nightly = _config(tmp_path, "nightly")
    # 150 ms per simulated call: the run lasts long enough to be killed while it generates
    slow = _config(
        tmp_path, "nightly-slow", benchmark="tiny-slow", latency_ms=150
    )  # nothing of it cached
    stack = Stack(tmp_path, tmp_path / "wh.duckdb")
    try:
        stack.start_server()
        stack.cli("prefect", "work-pool", "create", "clonemem", "--type", "process")
        stack.cli("prefect", "--no-prompt", "deploy", "--name", "pipeline")
        stack.start_worker("night-worker")
        runs: dict[str, str] = {}

        runs["first"] = stack.run_deployment("pipeline/pipeline", {"config": str(nightly)})
        first = stack.wait(runs["first"], 600)
        assert first["state"]["type"] == "COMPLETED", (first["state"], stack.tail("night-worker"))

        runs["cached"] = stack.run_deployment("pipeline/pipeline", {"config": str(nightly)})
        cached = stack.wait(runs["cached"], 600)
        assert cached["state"]["type"] == "COMPLETED", (cached["state"], stack.tail("night-worker"))
        assert _seconds(cached) < CACHED_RERUN_S, (_seconds(first), _seconds(cached))

        runs["failing"] = stack.run_deployment(
            "pipeline/pipeline", {"config": str(tmp_path / "missing.toml")}
        )
        assert stack.wait(runs["failing"], 300)["state"]["type"] == "FAILED"

        runs["killed"] = stack.run_deployment("pipeline/pipeline", {"config": str(slow)})
        stack.wait(runs["killed"], 300, states={"RUNNING"})
        deadline = time.monotonic() + 300
        while (
            _pipeline_row_status(stack.warehouse, runs["killed"]) != "running"
        ):  # its row is written at start
            assert time.monotonic() < deadline, stack.tail("night-worker")
            time.sleep(0.5)
        time.sleep(3)  # well into generation
        stack.kill(
            "night-worker"
        )  # the worker and its flow run's process tree, SIGKILL: a lost machine
        # nothing marks the lost run on the server without heartbeats: it stays RUNNING there
        assert stack.flow_run(runs["killed"])["state"]["type"] == "RUNNING"
    finally:
        stack.stop_all()

    # the Runs page: four pipeline runs, each with how it ended (the killed one judged by its dead process)
    monkeypatch.setenv("CLONEMEM_WAREHOUSE", str(stack.warehouse))
    monkeypatch.setenv("PREFECT_API_URL", stack.api_url)
    monkeypatch.delenv("PREFECT_UI_URL", raising=False)
    at = app("Runs")
    table = frame(at, "kind", "status", "seconds")
    pipeline = {
        run_id: status
        for run_id, kind, status in zip(table["run_id"], table["kind"], table["status"])
        if kind == "pipeline"
    }
    assert pipeline == {
        runs["first"]: "completed",
        runs["cached"]: "completed",
        runs["failing"]: "failed",
        runs["killed"]: "crashed",
    }
    unfinished = frame(at, "status", "error", "flow_run_id")
    errors = dict(zip(unfinished["status"], unfinished["error"]))
    assert "missing.toml" in errors["failed"] and errors["crashed"].startswith(
        "crashed: its process"
    )
    ui = stack.api_url.removesuffix("/api")
    assert f"{ui}/runs/flow-run/{runs['failing']}" in unfinished["flow_run_id"].to_list()

    # the History page: the one evaluation of 'tiny' (the cached re-run's identical one reused it)
    evaluations = sql(
        stack.warehouse,
        "SELECT eval_run_id FROM eval_runs e JOIN benchmarks b USING (benchmark_id) "
        "WHERE b.name = 'tiny'",
    )
    assert evaluations.height == 1
    series = next(
        df for df in charts(app("History", benchmark="tiny"))[0].values() if "system" in df.columns
    )
    assert set(series["system"]) == {"bm25", "oracle"}
    assert set(series["eval_run_id"]) == set(evaluations["eval_run_id"])
