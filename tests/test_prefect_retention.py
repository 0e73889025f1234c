"""Retention on a real Prefect server (issue: operations): with the README's settings ("Deployments",
retention) the server's database-vacuum service deletes flow runs that ended more than the retention
period ago — with their subflows, task runs and logs — and keeps newer ones.

Runs cannot be made a month old in a test, so the test ages finished runs by rewriting their end time
in the server's SQLite database, which is what the vacuum reads.
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
import sys
import time
from pathlib import Path

import pytest

from tests.prefect_server_kit import Stack

pytestmark = [pytest.mark.prefect_server, pytest.mark.slow, pytest.mark.timeout(600)]

RETENTION_DAYS = 30
# As in the README; only the loop is shortened (hourly by default) so the test need not wait.
SETTINGS = {
    "PREFECT_SERVER_SERVICES_DB_VACUUM_ENABLED": "events,flow_runs",
    "PREFECT_SERVER_SERVICES_DB_VACUUM_RETENTION_PERIOD": str(RETENTION_DAYS * 86400),
    "PREFECT_SERVER_SERVICES_DB_VACUUM_LOOP_SECONDS": "2",
}

# A nightly run in miniature: a flow with a subflow and a task, which logs.
RUNS = """
import json
from prefect import flow, get_run_logger, task

@task
def step(n):
    get_run_logger().warning("step %s", n)
    return n

@flow
def stage(n):
    return step(n)

@flow(name="nightly")
def nightly(n):
    stage(n)

ids = []
for n in range(3):
    state = nightly(n, return_state=True)
    ids.append(str(state.state_details.flow_run_id))
print(json.dumps(ids))
"""


def _age(db: Path, run_ids: list[str], days: int) -> None:
    """Move the end (and start) of these runs ``days`` into the past, in the stored format."""
    with sqlite3.connect(db, timeout=60) as con:
        for run_id in run_ids:
            for column in ("end_time", "start_time"):
                (value,) = con.execute(
                    f"SELECT {column} FROM flow_run WHERE id = ?", (run_id,)
                ).fetchone()
                when = dt.datetime.fromisoformat(value) - dt.timedelta(days=days)
                con.execute(
                    f"UPDATE flow_run SET {column} = ? WHERE id = ?",
                    (when.isoformat(sep=" ") if " " in value else when.isoformat(), run_id),
                )


def test_the_vacuum_deletes_runs_past_retention_with_their_subflows_task_runs_and_logs(
    tmp_path: Path,
) -> None:
    stack = Stack(tmp_path, tmp_path / "wh.duckdb", **SETTINGS)
    try:
        stack.start_server()
        old, recent, fresh = json.loads(
            stack.cli(sys.executable, "-c", RUNS).stdout.strip().splitlines()[-1]
        )
        runs = {r["id"]: r for r in stack.flow_runs()}
        children = {
            name: [
                i
                for i, r in runs.items()
                if r["parent_task_run_id"] and _root(runs, stack, i) == top
            ]
            for name, top in (("old", old), ("recent", recent), ("fresh", fresh))
        }
        assert all(len(c) == 1 for c in children.values()), children
        assert _count(stack, "logs", [old, *children["old"]]) > 0
        db = Path(stack.env["PREFECT_HOME"]) / "prefect.db"
        _age(db, [old, *children["old"]], RETENTION_DAYS + 1)
        _age(db, [recent, *children["recent"]], RETENTION_DAYS - 1)

        deadline = time.monotonic() + 120
        gone = {old, *children["old"]}
        while {r["id"] for r in stack.flow_runs()} & gone:
            assert time.monotonic() < deadline, f"not vacuumed:\n{stack.tail('server')}"
            time.sleep(2)
        left = {r["id"] for r in stack.flow_runs()}
        assert {recent, fresh, *children["recent"], *children["fresh"]} <= left
        assert (
            _count(stack, "task_runs", sorted(gone)) == 0
            and _count(stack, "logs", sorted(gone)) == 0
        )
        assert _count(stack, "task_runs", [recent, *children["recent"]]) > 0
    finally:
        stack.stop_all()


def _root(runs: dict, stack: Stack, run_id: str) -> str:
    """The top-level flow run above ``run_id`` (a subflow's parent task run belongs to its parent run)."""
    parent_task = runs[run_id]["parent_task_run_id"]
    while parent_task:
        run_id = stack.request("GET", f"/task_runs/{parent_task}")["flow_run_id"]
        parent_task = runs[run_id]["parent_task_run_id"]
    return run_id


def _count(stack: Stack, what: str, flow_run_ids: list[str]) -> int:
    if what == "logs":
        return len(
            stack.request(
                "POST", "/logs/filter", json={"logs": {"flow_run_id": {"any_": flow_run_ids}}}
            )
        )
    return stack.request(
        "POST", f"/{what}/count", json={"flow_runs": {"id": {"any_": flow_run_ids}}}
    )
