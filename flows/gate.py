"""The gate as a Prefect flow with one task, so it runs after generation and by `clonemem gate`.

A failed gate fails the flow run (its message lists the unmet expectations), so a scheduled run in
Prefect's UI shows it; the stored verdict and results are the same either way."""

from __future__ import annotations

from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from clonemem.expectations.gate import GateFailed, GateResult, run_gate
from clonemem.tasks.context import flow_run_ids
from clonemem.tasks.reporting import publish_gate


@task(cache_policy=NO_CACHE, task_run_name="gate {benchmark}")
def gate_task(warehouse_path: str, benchmark: str) -> GateResult:
    """Validate a benchmark with Great Expectations and mark it passed or failed (never cached)."""
    return run_gate(warehouse_path, benchmark, run_id=flow_run_ids()[0])


@flow(name="gate")
def gate_flow(warehouse_path: str, benchmark: str) -> GateResult:
    """Run the gate on ``benchmark`` (id or name); raises :class:`GateFailed` when it fails."""
    result = gate_task(warehouse_path, benchmark)
    publish_gate(result)
    if result.status != "passed":
        raise GateFailed(result)
    return result
