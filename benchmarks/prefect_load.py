"""The load a pipeline puts on a real Prefect server (issue: operations). Prints JSON.

Starts `prefect server` on a free port with a temporary ``PREFECT_HOME``, a process work pool, the
project's deployments and a worker (the README's commands, through ``tests/prefect_server_kit.py``), then
runs ``pipeline/pipeline`` on the demo config once cold and ``--cached-runs`` times again (a nightly
re-run with nothing changed). Reports, per run: the task runs it created (in total and, for generation,
per persona), its duration on the server (start to end of the flow run) and from `prefect deployment
run` to its final state, the LLM calls it landed, and how much the server's database (`prefect.db`
and its WAL) grew; plus how often the server logged ``database is locked``.

    python benchmarks/prefect_load.py [--cached-runs 2] [--config configs/demo.toml]

Targets: task runs per persona ≤ 1/10 of one per LLM step, a cached re-run under 30 s, database growth
under 2 MB per cached run.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import signal
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.prefect_server_kit import Stack  # noqa: E402


def db_bytes(home: Path) -> int:
    """What the server's database takes on disk: `prefect.db` and its write-ahead log."""
    return sum(p.stat().st_size for p in home.glob("prefect.db*") if p.is_file())


def db_used_bytes(home: Path) -> int:
    """The pages the database uses (its WAL included, free pages left out): growth independent of when
    SQLite checkpoints its log into the file."""
    import sqlite3

    with sqlite3.connect(f"file:{home / 'prefect.db'}?mode=ro", uri=True) as db:
        pages, free, size = (
            db.execute(f"PRAGMA {p}").fetchone()[0]
            for p in ("page_count", "freelist_count", "page_size")
        )
    return (pages - free) * size


def settled_db_bytes(home: Path, quiet_s: float = 4.0, limit_s: float = 90.0) -> int:
    """The database size once the server has stopped writing (events are persisted in batches)."""
    deadline = time.monotonic() + limit_s
    last, since = db_bytes(home), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(1)
        now = db_bytes(home)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            break
    return last


def count(stack: Stack, what: str, flow_run_ids: list[str]) -> int:
    return stack.request(
        "POST", f"/{what}/count", json={"flow_runs": {"id": {"any_": flow_run_ids}}}
    )


def subflows(stack: Stack, run_id: str) -> list[dict]:
    return stack.flow_runs(parent_flow_run_id={"any_": [run_id]})


def seconds(run: dict) -> float:
    start, end = (dt.datetime.fromisoformat(run[k]) for k in ("start_time", "end_time"))
    return round((end - start).total_seconds(), 1)


def llm_calls(warehouse: Path) -> int:
    from clonemem.warehouse import Warehouse

    with Warehouse.open_reader(warehouse) as wh:
        return int(wh.scalar("SELECT count(*) FROM llm_calls"))


def one_run(stack: Stack, config: str, home: Path) -> dict:
    before_db, before_used = db_bytes(home), db_used_bytes(home)
    before_calls = llm_calls(stack.warehouse) if stack.warehouse.exists() else 0
    started = time.perf_counter()
    run_id = stack.run_deployment("pipeline/pipeline", {"config": config})
    run = stack.wait(run_id, timeout=3600)
    wall = time.perf_counter() - started
    # a failed run is reported, not fatal: on today's SQLite server an overloaded API fails runs (503)
    state = (
        run["state"]["type"]
        if run["state"]["type"] == "COMPLETED"
        else f"{run['state']['type']}: {run['state'].get('message')}"
    )
    children = subflows(stack, run_id)
    gen = [
        c["id"]
        for c in children
        if c["name"]
        and c.get("flow_id")
        and stack.request("GET", f"/flows/{c['flow_id']}")["name"] == "generate-benchmark"
    ]
    after_db = settled_db_bytes(home)
    return {
        "state": state,
        "seconds": seconds(run),
        "wall_s": round(wall, 1),
        "task_runs": count(stack, "task_runs", [run_id, *(c["id"] for c in children)]),
        "generation_task_runs": count(stack, "task_runs", gen) if gen else None,
        "llm_calls": llm_calls(stack.warehouse) - before_calls,
        "db_growth_mb": round((after_db - before_db) / 2**20, 2),
        "db_mb": round(after_db / 2**20, 2),
        "db_used_growth_mb": round((db_used_bytes(home) - before_used) / 2**20, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--config", default="configs/demo.toml", help="a config path relative to the project"
    )
    parser.add_argument("--cached-runs", type=int, default=2)
    args = parser.parse_args()
    # stopped with SIGTERM: still stop the server and worker it started (the `finally` below)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    import tomllib

    personas = (
        tomllib.loads((ROOT / args.config).read_text("utf-8"))
        .get("generation", {})
        .get("personas", 1)
    )
    with tempfile.TemporaryDirectory(prefix="prefect-load-") as tmp:
        folder = Path(tmp)
        stack = Stack(folder, folder / "wh.duckdb")
        home = Path(stack.env["PREFECT_HOME"])
        try:
            stack.start_server()
            stack.cli("prefect", "work-pool", "create", "clonemem", "--type", "process")
            stack.cli("prefect", "--no-prompt", "deploy", "--all")
            stack.start_worker("worker")
            first = one_run(stack, args.config, home)
            cached = [one_run(stack, args.config, home) for _ in range(args.cached_runs)]
            locked = stack.tail("server", 10**6).count("database is locked")
        finally:
            stack.stop_all()
    gen = first["generation_task_runs"]
    out = {
        "config": args.config,
        "personas": personas,
        "generation_task_runs_per_persona": round(gen / personas, 1) if gen is not None else None,
        "first_run": first,
        "cached_runs": cached,
        "cached_run_seconds_max": max((r["seconds"] for r in cached), default=None),
        "db_growth_mb_per_cached_run": round(
            sum(r["db_growth_mb"] for r in cached) / len(cached), 2
        )
        if cached
        else None,
        "db_used_growth_mb_per_cached_run": (
            round(sum(r["db_used_growth_mb"] for r in cached) / len(cached), 2) if cached else None
        ),
        "database_is_locked": locked,
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
