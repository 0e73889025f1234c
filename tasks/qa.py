"""Stage IV: one cached step per candidate item (segment × question type; its calls retried by the wrapper), without a Prefect
task run each (see :mod:`clonemem.tasks.caching`); a persona's items run and landed for the flow; and the
reading and landing tasks around them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.results import ResultStore

from clonemem import ids, progress, runtime
from clonemem.llm.types import CallRecord, Paid
from clonemem.qa import stages as Q
from clonemem.qa.item import ItemResult
from clonemem.qa.land import arc_ids, cue_stats, land_qa, persona_ids, qa_rows
from clonemem.qa.pipeline import run_item
from clonemem.qa.report import QATally, candidates, cap_per_persona
from clonemem.qa.segments import persona_segments
from clonemem.runtime import StepPool
from clonemem.schemas import question_types
from clonemem.schemas.config import QAConfig, RunConfig
from clonemem.schemas.qa import Segment
from clonemem.schemas.results import CueStats
from clonemem.tasks.caching import StagePolicy, cached_step, policy_stages, step_key
from clonemem.tasks.context import as_is
from clonemem.warehouse import Warehouse
from clonemem.warehouse.runs import stops_run


@dataclass(frozen=True)
class PersonaSegments:
    persona_id: str
    segments: list[Segment]
    arc_ids: dict[str, str]


@dataclass(frozen=True)
class PersonaItems:
    """A persona's finished candidate items, and every call they paid for (failed items' too)."""

    results: list[ItemResult]
    calls: list[CallRecord]


QA_STAGES = (
    Q.PLAN.name,
    Q.WRITE.name,
    Q.SUFFICIENCY.name,
    Q.DISTRACTORS.name,
    Q.DISTRACTOR_CHECK.name,
    Q.PRIVACY_PLAN.name,
    Q.PRIVACY_WRITE.name,
)


ITEM_POLICY = StagePolicy(
    stage_names=QA_STAGES, modules=("clonemem.qa.pipeline", "clonemem.qa.privacy")
)


def run_qa_item(segment: Segment, question_type: str, rounds: int) -> Paid[ItemResult]:
    """Plan, write, validate and convert one candidate item (each LLM step through its role's model)."""
    return runtime.paid(
        lambda rec: run_item(segment, question_type, rounds, rec.run),
        covers=policy_stages(ITEM_POLICY, {}),
    )


def cached_qa_item(
    store: ResultStore, segment: Segment, question_type: str, rounds: int
) -> Paid[ItemResult]:
    """:func:`run_qa_item` served from ``store`` when run before with the same key (inputs, its source,
    stage IV's templates, models, seed and offline code, and the item pipeline's code), else run and stored."""
    inputs = {"segment": segment, "question_type": question_type, "rounds": rounds}
    return cached_step(
        step_key(run_qa_item, inputs, ITEM_POLICY),
        lambda: run_qa_item(segment, question_type, rounds),
        store,
    )[0]


# -- what a flow runs per persona -----------------------------------------------------------------------


def qa_tally(config: RunConfig, run_id: str) -> QATally:
    """The run's summary for the config's benchmark, filled persona by persona (``result`` at the end)."""
    return QATally(ids.benchmark_id(config.name), run_id)


def persona_items(
    pool: StepPool,
    store: ResultStore,
    persona: PersonaSegments,
    qa: QAConfig,
    tally: QATally,
    label: str,
) -> PersonaItems:
    """Run the persona's candidate items (segment × question type) on ``pool``, each a cached step, reporting
    progress under ``label``. An item that keeps failing is recorded in ``tally`` and the rest goes on; an
    error that stops the run (the budget, a rejected key) is raised: earlier personas stay landed, finished
    items cached."""
    cands = candidates(
        persona.segments, question_types.names(), qa.types_per_segment, qa.questions_per_type
    )
    futures = [
        pool.submit(cached_qa_item, store, seg, qtype, qa.distractor_rounds) for seg, qtype in cands
    ]
    results: list[ItemResult] = []
    calls: list[CallRecord] = []
    for i, ((seg, qtype), fut) in enumerate(zip(cands, futures), 1):
        progress.advance(label, i, len(cands))
        try:
            paid = fut.result()
        except Exception as exc:  # an item that keeps failing: recorded, the rest goes on
            if stops_run(exc):
                raise  # the run stops: earlier personas are landed, finished items cached
            calls += getattr(exc, "calls", ())
            tally.count_calls(getattr(exc, "calls", ()))
            tally.failed(seg, qtype, exc)
            continue
        results.append(paid.value)
        calls += paid.calls
        tally.count_calls(paid.calls, cached=paid.from_cache(tally.run_id))
    return PersonaItems(results, calls)


def land_persona_items(
    warehouse_path: str, persona: PersonaSegments, items: PersonaItems, qa: QAConfig, tally: QATally
) -> None:
    """Keep at most ``qa.max_questions_per_persona`` accepted items, tally them and land the persona's
    stage-IV rows with the calls they paid for (nothing written when unchanged)."""
    results = cap_per_persona(items.results, qa.max_questions_per_persona)
    tally.add(persona.segments, results)
    rows = qa_rows(
        persona.persona_id, tally.benchmark_id, persona.segments, results, persona.arc_ids
    )
    tally.landed += land_qa_task(
        warehouse_path,
        persona.persona_id,
        tally.benchmark_id,
        as_is(rows),
        tally.snapshot(),
        as_is(items.calls),
    )


# -- reading and landing -------------------------------------------------------------------------------


@task(cache_policy=NO_CACHE, task_run_name="segments {benchmark_id}")
def segments_task(warehouse_path: str, benchmark_id: str, qa: QAConfig) -> list[PersonaSegments]:
    """Every persona's trajectory segments (and its arc ids), read from the landed stages I–III."""
    with Warehouse.open_reader(warehouse_path) as wh:
        return [
            PersonaSegments(pid, persona_segments(wh, pid, qa), arc_ids(wh, pid))
            for pid in persona_ids(wh, benchmark_id)
        ]


@task(cache_policy=NO_CACHE, task_run_name="land qa {persona_id}")
def land_qa_task(
    warehouse_path: str,
    persona_id: str,
    benchmark_id: str,
    rows: dict[str, list[dict]],
    summary: dict,
    calls: Sequence[CallRecord],
) -> bool:
    """A persona's stage-IV output with the calls it paid for, in one transaction; False when unchanged."""
    with Warehouse.open_writer(warehouse_path) as wh:
        return land_qa(wh, persona_id, benchmark_id, rows, summary, calls)


@task(cache_policy=NO_CACHE, task_run_name="cues {benchmark_id}")
def cue_stats_task(warehouse_path: str, benchmark_id: str) -> CueStats:
    with Warehouse.open_reader(warehouse_path) as wh:
        return cue_stats(wh, benchmark_id)
