"""Every run visible, whatever its end (issue 22): a run whose process is killed leaves its row `running`;
the next run that begins on the warehouse marks it `crashed` with what is known, and the dashboard's Runs
page shows it as crashed at once, beside failed runs, each with its error line and a link to its Prefect
flow run."""

from __future__ import annotations

import dataclasses
import os
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import polars as pl
import pytest

from clonemem.schemas.config import RunConfig
from clonemem.tasks.runs import begin_run_task, flow_run_record, opener, tracked
from clonemem.warehouse import Warehouse
from tests.dashboard_kit import app, frame, imported_warehouse, texts
from tests.shared_kit import copy_warehouse

KILLED_FLOW_RUN = "0b6a3c1e-0000-4000-8000-00000000dead"
FAILED_FLOW_RUN = "0b6a3c1e-0000-4000-8000-0000000fa11d"

# A run as a flow starts it (its row written before its first call, by the runtime's opener), then the
# process is killed before it can record how it ended.
CHILD = textwrap.dedent("""
    import dataclasses, os, signal, sys
    from clonemem.schemas.config import RunConfig
    from clonemem.tasks.runs import flow_run_record, opener
    run = dataclasses.replace(flow_run_record("generate", RunConfig(name="killed")), run_id="killed",
                              flow_run_id=sys.argv[2])
    opener(sys.argv[1], run)()
    os.kill(os.getpid(), signal.SIGKILL)
""")


def _status(wh: Path) -> dict[str, tuple]:
    with Warehouse.open_reader(wh) as r:
        return {
            run_id: (status, error, finished)
            for run_id, status, error, finished in r.rows(
                "SELECT run_id, status, error, finished_at IS NOT NULL FROM runs"
            )
        }


@pytest.fixture(scope="module")
def runs_warehouse_once(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The imported fixtures, plus: a run killed mid-run (its own process), a run that failed (through
    ``tracked``, as a flow records it), and a run of this live process still under way. Built once (the
    killed child pays Python's start-up and imports); each test writes to a copy (``runs_warehouse``)."""
    wh = imported_warehouse(tmp_path_factory.mktemp("runs") / "wh.duckdb")
    child = subprocess.run(
        [sys.executable, "-c", CHILD, str(wh), KILLED_FLOW_RUN],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    failed = dataclasses.replace(
        flow_run_record("qa", RunConfig(name="failing")),
        run_id="failed",
        flow_run_id=FAILED_FLOW_RUN,
    )
    with pytest.raises(FileNotFoundError), tracked(str(wh), failed):
        raise FileNotFoundError("configs/missing.toml: no such config file")
    live = dataclasses.replace(flow_run_record("evaluate", RunConfig(name="live")), run_id="live")
    opener(str(wh), live)()
    assert {k: v[0] for k, v in _status(wh).items()} == {
        "killed": "running",
        "failed": "failed",
        "live": "running",
    }
    return wh


@pytest.fixture
def runs_warehouse(runs_warehouse_once: Path, tmp_path: Path) -> Path:
    return copy_warehouse(runs_warehouse_once, tmp_path / "wh.duckdb")


def test_the_next_run_marks_a_killed_runs_row_crashed_and_leaves_live_ones_running(
    runs_warehouse: Path,
) -> None:
    with Warehouse.open_reader(runs_warehouse) as r:
        host, pid = r.rows("SELECT host, pid FROM runs WHERE run_id = 'killed'")[0]
    assert host == socket.gethostname() and pid != os.getpid()
    # a run of another kind and benchmark begins: the killed run is none of its kind, and still found out
    begun = begin_run_task.fn(
        str(runs_warehouse), flow_run_record("generate", RunConfig(name="another"))
    )
    assert begun.resumed_from is None
    status = _status(runs_warehouse)
    assert status["killed"] == (
        "crashed",
        f"crashed: its process (pid {pid} on {host}) ended without recording "
        "how the run ended (killed, or its machine stopped)",
        True,
    )
    assert status["live"] == ("running", None, False)  # this process is alive: its run goes on
    assert status["failed"][:2] == ("failed", "configs/missing.toml: no such config file")


def test_a_pid_taken_by_another_process_or_another_host_is_judged_rightly() -> None:
    from clonemem.warehouse import owners

    me = owners.this_process()
    assert not owners.is_gone(me.host, me.pid, me.process_start)
    if me.process_start is not None:  # Linux: the same pid with another start is another process
        assert owners.is_gone(me.host, me.pid, me.process_start.split(":")[0] + ":1")
    assert not owners.is_gone(
        "another-host.example", 1, None
    )  # cannot be checked from here: not judged
    assert not owners.is_gone(None, None, None)  # rows from before owners were recorded


def test_runs_page_shows_failed_and_crashed_runs_with_their_error_and_prefect_link(
    runs_warehouse: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLONEMEM_WAREHOUSE", str(runs_warehouse))
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:4200/api")
    monkeypatch.delenv("PREFECT_UI_URL", raising=False)
    at = app("Runs")
    # the killed run is shown crashed before any run has marked it (the page only reads)
    assert _status(runs_warehouse)["killed"][0] == "running"
    shown = frame(at, "status", "error", "flow_run_id").sort("status")
    assert shown["status"].to_list() == ["crashed", "failed"]
    with Warehouse.open_reader(runs_warehouse) as r:
        pid = r.scalar("SELECT pid FROM runs WHERE run_id = 'killed'")
    assert shown["error"].to_list() == [
        f"crashed: its process (pid {pid} on {socket.gethostname()}) ended without "
        "recording how the run ended (killed, or its machine stopped)",
        "configs/missing.toml: no such config file",
    ]
    assert shown["flow_run_id"].to_list() == [
        f"http://127.0.0.1:4200/runs/flow-run/{KILLED_FLOW_RUN}",
        f"http://127.0.0.1:4200/runs/flow-run/{FAILED_FLOW_RUN}",
    ]
    assert shown["kind"].to_list() == ["generate", "qa"]
    # the full table agrees, and the live run is in it, running
    table = frame(at, "kind", "status", "seconds")
    assert dict(zip(table["run_id"], table["status"])) == {
        "killed": "crashed",
        "failed": "failed",
        "live": "running",
    }
    assert "process_start" not in table.columns


def test_runs_page_says_when_every_run_completed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wh = imported_warehouse(tmp_path / "wh.duckdb")
    done = dataclasses.replace(flow_run_record("import", RunConfig(name="ok")), run_id="ok")
    with Warehouse.open_writer(wh) as w:
        from clonemem.warehouse.runs import record_run

        record_run(w, done.finished("completed"))
    monkeypatch.setenv("CLONEMEM_WAREHOUSE", str(wh))
    at = app("Runs")
    assert "Every recorded run completed or is still running." in texts(at)
    assert not [
        df
        for df in at.dataframe
        if "error" in df.value.columns and "seconds" not in df.value.columns
    ]
    assert pl.DataFrame(frame(at, "kind", "status", "seconds"))["status"].to_list() == ["completed"]


@pytest.mark.prefect
def test_a_run_whose_config_cannot_be_read_leaves_a_failed_row(tmp_path: Path) -> None:
    """The reported case: a nightly run with a missing config wrote nothing, so the Runs page could not show
    it failed. It now leaves a failed pipeline row naming the file; without a warehouse none is created."""
    from clonemem.flows.pipeline import pipeline_flow

    wh = imported_warehouse(tmp_path / "wh.duckdb")
    missing = tmp_path / "missing.toml"
    with pytest.raises(Exception, match="missing.toml"):
        pipeline_flow(str(wh), str(missing))
    with Warehouse.open_reader(wh) as r:
        [(kind, benchmark, status, error)] = r.rows(
            "SELECT kind, benchmark_id, status, error FROM runs"
        )
    assert (kind, benchmark, status) == ("pipeline", None, "failed") and "missing.toml" in error
    with pytest.raises(Exception, match="missing.toml"):
        pipeline_flow(str(tmp_path / "none.duckdb"), str(missing))
    assert not (tmp_path / "none.duckdb").exists()


def test_a_deployment_run_has_its_running_row_from_its_start(
    runs_warehouse: Path, tmp_path: Path
) -> None:
    """A nightly run whose worker dies mid-run (before any stage finished) must still be seen: a deployment's
    pipeline run writes its `running` row as it starts (then the next run, or the Runs page, finds its process
    dead); a first run on no warehouse creates none for it."""
    from clonemem.tasks.runs import open_run_task

    run = dataclasses.replace(
        flow_run_record("pipeline", RunConfig(name="nightly")),
        run_id="nightly-1",
        deployment_id="0b6a3c1e-0000-4000-8000-0000000de910",
    )
    opened = open_run_task.fn(str(runs_warehouse), run)
    assert opened is not None and opened.status == "running"
    status = _status(runs_warehouse)
    assert status["nightly-1"] == ("running", None, False)
    assert status["killed"][0] == "crashed"  # found out as the run began, as every run's start does
    assert open_run_task.fn(str(tmp_path / "none.duckdb"), run) is None
    assert not (tmp_path / "none.duckdb").exists()
