"""The gate as a Prefect flow with one task, so it runs after generation and by `clonemem gate`."""

from __future__ import annotations

from dataclasses import asdict

from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from clonemem.expectations.gate import GateResult, run_gate


@task(cache_policy=NO_CACHE, task_run_name="gate {benchmark}")
def gate_task(warehouse_path: str, benchmark: str) -> GateResult:
    """Validate a benchmark with Great Expectations and mark it passed or failed (never cached)."""
    return run_gate(warehouse_path, benchmark)


@flow(name="gate")
def gate_flow(warehouse_path: str, benchmark: str) -> dict:
    result = gate_task(warehouse_path, benchmark)
    out = asdict(result)
    out["params"] = {k: v for k, v in result.params.items() if k != "media_mix_query"}
    return out
