"""Stage IV as Prefect tasks: one cached, retryable task per candidate item (segment × question type)."""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import INPUTS, TASK_SOURCE

from clonemem import runtime
from clonemem.qa import stages as Q
from clonemem.qa.pipeline import ItemResult, run_item
from clonemem.schemas.qa import Segment
from clonemem.tasks.caching import StagePolicy
from clonemem.tasks.generation import _transient_only

QA_STAGES = (Q.PLAN.name, Q.WRITE.name, Q.SUFFICIENCY.name, Q.DISTRACTORS.name, Q.DISTRACTOR_CHECK.name)


@task(cache_policy=INPUTS + TASK_SOURCE + StagePolicy(stage_names=QA_STAGES, modules=("clonemem.qa.pipeline", "clonemem.schemas.question_types")), persist_result=True, retries=2,
      retry_delay_seconds=0.2, retry_condition_fn=_transient_only, task_run_name="qa {question_type} {segment.segment_id}")
def qa_item(segment: Segment, question_type: str, rounds: int) -> ItemResult:
    """Plan, write, validate and convert one candidate item (each LLM step through its role's model)."""
    rt = runtime.current()
    return run_item(segment, question_type, rounds, lambda stage, inp: stage.run(rt.model(stage.role), inp))  # type: ignore[arg-type]
