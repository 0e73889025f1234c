"""A tiny pipeline for the fault, kill/resume and concurrency tests: one small persona through the real
CLI in a subprocess (its own Prefect home, so caches never leak between scenarios)."""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

EXE = str(Path(sys.executable).with_name("clonemem"))

# One persona, a few events: every stage runs (I–IV, gate) in seconds. The file is shared with
# benchmarks/dashboard_pages.py; here its persona count is a ``{personas}`` placeholder.
TINY_TOML = Path(__file__).resolve().parents[1] / "configs" / "tiny.toml"
TINY = TINY_TOML.read_text("utf-8").replace("\npersonas = 1\n", "\npersonas = {personas}\n", 1)
assert "{personas}" in TINY, f"{TINY_TOML} no longer sets `personas = 1`"


def tiny_config(folder: Path, name: str = "tiny", personas: int = 1, **offline: object) -> Path:
    path = folder / f"{name}.toml"
    path.write_text(
        TINY.replace("{personas}", str(personas))
        + "".join(f"{k} = {v}\n" for k, v in offline.items()),
        "utf-8",
    )
    return path


def env_for(home: Path, **extra: str) -> dict[str, str]:
    # as a user's shell: the logging levels this test process set for itself are not exported to the CLI
    dropped = {"CLONEMEM_FAULT_KILL_AT", "PREFECT_LOGGING_LEVEL", "PREFECT_LOGGING_SERVER_LEVEL"}
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    env.update({"PREFECT_HOME": str(home), "CLONEMEM_LOCK_WAIT": "600", **extra})
    return env


def clonemem(
    wh: Path, home: Path, *args: str, kill_at: str | None = None, timeout: float = 600, **extra: str
) -> subprocess.CompletedProcess:
    """Run `clonemem --warehouse WH ARGS...` to the end (or to its planned SIGKILL)."""
    env = env_for(home, **extra)
    if kill_at:
        env["CLONEMEM_FAULT_KILL_AT"] = kill_at
    return subprocess.run(
        [EXE, "--warehouse", str(wh), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def start(wh: Path, home: Path, *args: str, **extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [EXE, "--warehouse", str(wh), *args],
        env=env_for(home, **extra),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


# Tables that hold a benchmark's content (no wall-clock values, no run ids).
CONTENT_TABLES = [
    "personas",
    "relations",
    "event_seeds",
    "life_arcs",
    "arc_anchor_states",
    "major_events",
    "major_event_arcs",
    "snapshots",
    "phases",
    "detailed_events",
    "evidence",
    "evidence_arcs",
    "traces",
    "evidence_traces",
    "persona_landings",
    "trajectory_segments",
    "questions",
    "question_evidence",
    "question_traces",
    "question_choices",
    "qa_rejected",
]


def content(wh_path: Path) -> dict[str, list[str]]:
    from clonemem.warehouse import Warehouse

    with Warehouse.open_reader(wh_path) as wh:
        out = {t: sorted(map(repr, wh.rows(f"SELECT * FROM {t}"))) for t in CONTENT_TABLES}
        out["benchmarks"] = [
            repr(r)
            for r in wh.rows(
                "SELECT benchmark_id, name, source, gate_status, status FROM benchmarks ORDER BY name"
            )
        ]
    return out


def export(wh: Path, home: Path, out: Path, name: str = "tiny") -> dict[str, bytes]:
    got = clonemem(wh, home, "export-release", name, "--out", str(out))
    assert got.returncode == 0, got.stderr
    return {p.name: p.read_bytes() for p in sorted(out.iterdir())}


@contextlib.contextmanager
def flow_run_lines_at_info() -> Iterator[None]:
    """Flow runs' log lines at INFO while the block runs, as a deployment's worker logs them (this test
    process keeps Prefect at WARNING)."""
    runs_logger = logging.getLogger("prefect.flow_runs")
    saved = runs_logger.level
    runs_logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        runs_logger.setLevel(saved)


def flow_run_records(
    flow_run_id: Any, last_line: str, wait_s: float = 30
) -> tuple[list, list, list]:
    """The ids of a flow run and its subflows, their artifacts and their log records. Prefect ships log lines
    in batches from a background worker: what is queued is sent, then the logs are read again until a line
    starting with ``last_line`` has arrived (it once had not when read at once under load) or ``wait_s``."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, LogFilter, LogFilterFlowRunId
    from prefect.logging.handlers import APILogHandler

    APILogHandler().flush()
    with get_client(sync_client=True) as client:
        subflows = client.read_flow_runs(
            flow_run_filter=FlowRunFilter(parent_flow_run_id={"any_": [flow_run_id]})
        )  # type: ignore[arg-type]
        run_ids = [flow_run_id, *(r.id for r in subflows)]
        artifacts = client.read_artifacts(flow_run_filter=FlowRunFilter(id={"any_": run_ids}))  # type: ignore[arg-type]
        deadline = time.monotonic() + wait_s
        while True:
            logs = client.read_logs(
                log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=run_ids))
            )
            if (
                any(log.message.startswith(last_line) for log in logs)
                or time.monotonic() > deadline
            ):
                return run_ids, artifacts, logs
            time.sleep(0.5)
