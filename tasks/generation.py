"""Generation as Prefect tasks: one task per LLM step, cached across runs, retried on transient
failures (a permanent error, such as a rejected key, is not retried); and the landing steps."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel
from prefect import Task, task
from prefect.cache_policies import INPUTS, NO_CACHE, TASK_SOURCE

from clonemem import runtime
from clonemem.generation.stages import STAGES, Stage
from clonemem.generation.assemble import Assembly
from clonemem.generation.land import ensure_benchmark, land_persona
from clonemem.llm.types import CallRecord, LiveProviderDisabled, Paid, PermanentError, StageNotCovered
from clonemem.schemas.config import RunConfig
from clonemem.tasks.caching import StagePolicy, covered_stages
from clonemem.warehouse import Warehouse
from clonemem.warehouse.runs import FailureRecord, RunRecord, record_run


def _transient_only(task: Task, task_run: object, state: object) -> bool:
    try:
        state.result()  # type: ignore[attr-defined]
    except (PermanentError, LiveProviderDisabled, StageNotCovered, TypeError):
        return False
    except Exception:
        return True
    return False


@task(cache_policy=INPUTS + TASK_SOURCE + StagePolicy(), persist_result=True, retries=2, retry_delay_seconds=0.2,
      retry_condition_fn=_transient_only, task_run_name="{stage_name} {item}")
def run_stage(stage_name: str, item: str, inp: BaseModel) -> Paid[BaseModel]:
    """Run one generation step (``item`` names it, e.g. E2P1D3T1) through the role's model; the result
    carries the calls it made (cached with it, landed with the persona)."""
    stage = STAGES.get(stage_name)
    return runtime.paid(lambda rec: rec.run(stage, inp), covers=covered_stages())


_TASKS: dict[str, Task] = {}


def stage_task(stage: Stage) -> Task:
    """The task of one stage, named after it (made once: building task variants is not free)."""
    if stage.name not in _TASKS:
        _TASKS[stage.name] = run_stage.with_options(name=stage.name)
    return _TASKS[stage.name]


# -- landing (through this process's writer; the CLI holds the writer lock for the whole command) -----


@task(cache_policy=NO_CACHE, task_run_name="benchmark {config.name}")
def ensure_benchmark_task(warehouse_path: str, config: RunConfig) -> bool:
    """Create or update the benchmark's row; whether anything was written."""
    with Warehouse.open_writer(warehouse_path) as wh:
        return ensure_benchmark(wh, config)


@task(cache_policy=NO_CACHE, task_run_name="land {assembly.rows.persona_id}")
def land_persona_task(warehouse_path: str, assembly: Assembly, benchmark_id: str, calls: Sequence[CallRecord]) -> bool:
    """One finished persona, with the calls it paid for, in one transaction; False when unchanged."""
    with Warehouse.open_writer(warehouse_path) as wh:
        return land_persona(wh, assembly, benchmark_id, calls)


@task(cache_policy=NO_CACHE, task_run_name="record {run.kind} run")
def record_run_task(warehouse_path: str, run: RunRecord, failures: Sequence[FailureRecord] = ()) -> None:
    with Warehouse.open_writer(warehouse_path) as wh:
        record_run(wh, run, failures)
