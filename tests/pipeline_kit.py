"""A tiny pipeline for the fault, kill/resume and concurrency tests: one small persona through the real
CLI in a subprocess (its own Prefect home, so caches never leak between scenarios)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

EXE = str(Path(sys.executable).with_name("clonemem"))

# One persona, a few events: every stage runs (I–IV, gate) in seconds. The file is shared with
# benchmarks/dashboard_pages.py; here its persona count is a ``{personas}`` placeholder.
TINY_TOML = Path(__file__).resolve().parents[1] / "configs" / "tiny.toml"
TINY = TINY_TOML.read_text("utf-8").replace("\npersonas = 1\n", "\npersonas = {personas}\n", 1)
assert "{personas}" in TINY, f"{TINY_TOML} no longer sets `personas = 1`"


def tiny_config(folder: Path, name: str = "tiny", personas: int = 1, **offline: object) -> Path:
    path = folder / f"{name}.toml"
    path.write_text(TINY.replace("{personas}", str(personas)) + "".join(f"{k} = {v}\n" for k, v in offline.items()), "utf-8")
    return path


def env_for(home: Path, **extra: str) -> dict[str, str]:
    # as a user's shell: the logging levels this test process set for itself are not exported to the CLI
    dropped = {"CLONEMEM_FAULT_KILL_AT", "PREFECT_LOGGING_LEVEL", "PREFECT_LOGGING_SERVER_LEVEL"}
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    env.update({"PREFECT_HOME": str(home), "CLONEMEM_LOCK_WAIT": "600", **extra})
    return env


def clonemem(wh: Path, home: Path, *args: str, kill_at: str | None = None, timeout: float = 600,
             **extra: str) -> subprocess.CompletedProcess:
    """Run `clonemem --warehouse WH ARGS...` to the end (or to its planned SIGKILL)."""
    env = env_for(home, **extra)
    if kill_at:
        env["CLONEMEM_FAULT_KILL_AT"] = kill_at
    return subprocess.run([EXE, "--warehouse", str(wh), *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def start(wh: Path, home: Path, *args: str, **extra: str) -> subprocess.Popen:
    return subprocess.Popen([EXE, "--warehouse", str(wh), *args], env=env_for(home, **extra),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


# Tables that hold a benchmark's content (no wall-clock values, no run ids).
CONTENT_TABLES = ["personas", "relations", "event_seeds", "life_arcs", "arc_anchor_states", "major_events",
                  "major_event_arcs", "snapshots", "phases", "detailed_events", "evidence", "evidence_arcs", "traces",
                  "evidence_traces", "persona_landings", "trajectory_segments", "questions", "question_evidence",
                  "question_traces", "question_choices", "qa_rejected"]


def content(wh_path: Path) -> dict[str, list[str]]:
    from clonemem.warehouse import Warehouse

    with Warehouse.open_reader(wh_path) as wh:
        out = {t: sorted(map(repr, wh.rows(f"SELECT * FROM {t}"))) for t in CONTENT_TABLES}
        out["benchmarks"] = [repr(r) for r in wh.rows(
            "SELECT benchmark_id, name, source, gate_status, status FROM benchmarks ORDER BY name")]
    return out


def export(wh: Path, home: Path, out: Path, name: str = "tiny") -> dict[str, bytes]:
    got = clonemem(wh, home, "export-release", name, "--out", str(out))
    assert got.returncode == 0, got.stderr
    return {p.name: p.read_bytes() for p in sorted(out.iterdir())}
