"""The gate as Prefect tasks: running it on a benchmark, and reading the verdict stored for one (never
cached: the verdict is the warehouse's, and the gate writes it)."""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import NO_CACHE

from clonemem.expectations.gate import run_gate
from clonemem.schemas.results import GateResult
from clonemem.tasks.context import flow_run_ids
from clonemem.warehouse import Warehouse
from clonemem.warehouse.catalog import gate_status


@task(cache_policy=NO_CACHE, task_run_name="gate {benchmark}")
def gate_task(warehouse_path: str, benchmark: str) -> GateResult:
    """Validate a benchmark with Great Expectations and mark it passed or failed (never cached)."""
    return run_gate(warehouse_path, benchmark, run_id=flow_run_ids()[0])


@task(cache_policy=NO_CACHE, task_run_name="gate status {benchmark_id}")
def gate_status_task(warehouse_path: str, benchmark_id: str) -> str | None:
    """The benchmark's stored gate status (``passed``, ``failed``, ``pending``), or None."""
    with Warehouse.open_reader(warehouse_path) as wh:
        return gate_status(wh, benchmark_id)
