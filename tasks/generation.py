"""Generation LLM steps as Prefect tasks: one task per stage, cached across runs, retried on
transient failures (a permanent error, such as a rejected key, is not retried)."""

from __future__ import annotations

from pydantic import BaseModel
from prefect import Task, task
from prefect.cache_policies import INPUTS, TASK_SOURCE

from clonemem import runtime
from clonemem.generation.stages import STAGES, Stage
from clonemem.llm.types import LiveProviderDisabled, PermanentError
from clonemem.tasks.caching import StagePolicy


def _transient_only(task: Task, task_run: object, state: object) -> bool:
    try:
        state.result()  # type: ignore[attr-defined]
    except (PermanentError, LiveProviderDisabled, TypeError):
        return False
    except Exception:
        return True
    return False


@task(cache_policy=INPUTS + TASK_SOURCE + StagePolicy(), persist_result=True, retries=2, retry_delay_seconds=0.2,
      retry_condition_fn=_transient_only, task_run_name="{stage_name} {item}")
def run_stage(stage_name: str, item: str, inp: BaseModel) -> BaseModel:
    """Run one generation step (``item`` names it, e.g. E2P1D3T1) through the role's model."""
    stage = STAGES.get(stage_name)
    return stage.run(runtime.current().model(stage.role), inp)


_TASKS: dict[str, Task] = {}


def stage_task(stage: Stage) -> Task:
    """The task of one stage, named after it (made once: building task variants is not free)."""
    if stage.name not in _TASKS:
        _TASKS[stage.name] = run_stage.with_options(name=stage.name)
    return _TASKS[stage.name]
