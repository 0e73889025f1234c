"""The gate as a Prefect flow with one task, so it runs after generation and by `clonemem gate`.

A failed gate fails the flow run (its message lists the unmet expectations), so a scheduled run in
Prefect's UI shows it; the stored verdict and results are the same either way."""

from __future__ import annotations

from prefect import flow

from clonemem.schemas.results import GateFailed, GateResult
from clonemem.tasks.gate import gate_task
from clonemem.tasks.reporting import publish_gate


@flow(name="gate")
def gate_flow(warehouse_path: str, benchmark: str) -> GateResult:
    """Run the gate on ``benchmark`` (id or name); raises :class:`GateFailed` when it fails."""
    result = gate_task(warehouse_path, benchmark)
    publish_gate(result)
    if result.status != "passed":
        raise GateFailed(result)
    return result
