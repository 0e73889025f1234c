"""Stage IV as Prefect tasks: one cached, retryable task per candidate item (segment × question type), and
the reading and landing steps around them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from prefect import task
from prefect.cache_policies import INPUTS, NO_CACHE, TASK_SOURCE

from clonemem import runtime
from clonemem.llm.types import CallRecord, Paid
from clonemem.qa import stages as Q
from clonemem.qa.land import arc_ids, cue_stats, land_qa, persona_ids
from clonemem.qa.pipeline import ItemResult, run_item
from clonemem.qa.segments import persona_segments
from clonemem.schemas.config import QAConfig
from clonemem.schemas.qa import Segment
from clonemem.schemas.results import CueStats
from clonemem.tasks.caching import StagePolicy, covered_stages
from clonemem.tasks.generation import _transient_only
from clonemem.warehouse import Warehouse


@dataclass(frozen=True)
class PersonaSegments:
    persona_id: str
    segments: list[Segment]
    arc_ids: dict[str, str]


QA_STAGES = (Q.PLAN.name, Q.WRITE.name, Q.SUFFICIENCY.name, Q.DISTRACTORS.name, Q.DISTRACTOR_CHECK.name)


@task(cache_policy=INPUTS + TASK_SOURCE + StagePolicy(stage_names=QA_STAGES, modules=("clonemem.qa.pipeline",)),
      persist_result=True, retries=2, retry_delay_seconds=0.2, retry_condition_fn=_transient_only, task_run_name="qa {question_type} {segment.segment_id}")
def qa_item(segment: Segment, question_type: str, rounds: int) -> Paid[ItemResult]:
    """Plan, write, validate and convert one candidate item (each LLM step through its role's model)."""
    return runtime.paid(lambda rec: run_item(segment, question_type, rounds, rec.run), covers=covered_stages())


@task(cache_policy=NO_CACHE, task_run_name="segments {benchmark_id}")
def segments_task(warehouse_path: str, benchmark_id: str, qa: QAConfig) -> list[PersonaSegments]:
    """Every persona's trajectory segments (and its arc ids), read from the landed stages I–III."""
    with Warehouse.open_reader(warehouse_path) as wh:
        return [PersonaSegments(pid, persona_segments(wh, pid, qa), arc_ids(wh, pid)) for pid in persona_ids(wh, benchmark_id)]


@task(cache_policy=NO_CACHE, task_run_name="land qa {persona_id}")
def land_qa_task(warehouse_path: str, persona_id: str, benchmark_id: str, rows: dict[str, list[dict]], summary: dict,
                 calls: Sequence[CallRecord]) -> bool:
    """A persona's stage-IV output with the calls it paid for, in one transaction; False when unchanged."""
    with Warehouse.open_writer(warehouse_path) as wh:
        return land_qa(wh, persona_id, benchmark_id, rows, summary, calls)


@task(cache_policy=NO_CACHE, task_run_name="cues {benchmark_id}")
def cue_stats_task(warehouse_path: str, benchmark_id: str) -> CueStats:
    with Warehouse.open_reader(warehouse_path) as wh:
        return cue_stats(wh, benchmark_id)
