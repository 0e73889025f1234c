"""Generation's LLM steps, each cached across runs without a Prefect task run of its own (one per step
made the Prefect server's load grow with the steps: see :mod:`clonemem.tasks.caching`), their LLM calls
retried by the wrapper within one budget per call (a failed step is not tried again); what the flows run with them (every
persona of a config, landed as each completes, or one persona into a bundle); and the landing tasks."""

from __future__ import annotations

from collections.abc import Sequence

from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.results import ResultStore
from pydantic import BaseModel

from clonemem import ids, progress, runtime
from clonemem.generation.assemble import Assembly, assemble
from clonemem.generation.bundle import write_bundle
from clonemem.generation.dag import PersonaDag
from clonemem.generation.execute import Step, new_dags, run_pooled
from clonemem.generation.land import ensure_benchmark, land_persona
from clonemem.generation.report import GenerationTally
from clonemem.generation.stages import STAGES
from clonemem.llm.types import CallRecord, Paid
from clonemem.schemas.config import RunConfig
from clonemem.schemas.results import PersonaBundleResult
from clonemem.tasks.caching import (
    StagePolicy,
    cached_step,
    policy_stages,
    step_key,
    step_store,
)
from clonemem.tasks.context import as_is
from clonemem.tasks.runs import finish_run
from clonemem.warehouse import Warehouse
from clonemem.warehouse.runs import FailureRecord, RunRecord

STEP_POLICY = StagePolicy()  # the stage named by the step's `stage_name` input


def run_stage(stage_name: str, item: str, inp: BaseModel) -> Paid[BaseModel]:
    """Run one generation step (``item`` names it, e.g. E2P1D3T1) through the role's model; the result
    carries the calls it made (cached with it, landed with the persona)."""
    stage = STAGES.get(stage_name)
    # the step's key covers exactly this stage: a call to any other is refused
    return runtime.paid(
        lambda rec: rec.run(stage, inp),
        covers=policy_stages(STEP_POLICY, {"stage_name": stage_name}),
    )


def cached_stage(store: ResultStore, stage_name: str, item: str, inp: BaseModel) -> Paid[BaseModel]:
    """:func:`run_stage` served from ``store`` when this step ran before with the same key (inputs, this
    module's step source, the stage's template, model, seed and offline code), else run and stored."""
    inputs = {"stage_name": stage_name, "item": item, "inp": inp}
    return cached_step(
        step_key(run_stage, inputs, STEP_POLICY), lambda: run_stage(stage_name, item, inp), store
    )[0]


def cached_steps() -> Step:
    """Steps served from (and stored in) the current run's result store."""
    store = step_store()
    return lambda stage, inp, item: cached_stage(store, stage.name, item, inp)


# -- what a flow runs: every persona of a config, or one into a bundle ---------------------------------


def generation_tally(config: RunConfig, run_id: str) -> GenerationTally:
    """The run's summary, filled as personas finish (``result`` and ``failure_records`` at the end)."""
    return GenerationTally(
        ids.benchmark_id(config.name), config.name, config.generation.personas, run_id
    )


def generate_and_land(warehouse_path: str, config: RunConfig, tally: GenerationTally) -> None:
    """Generate every persona of the config on a pool of ``generation.workers`` threads (each step cached);
    each, as soon as it is complete, is checked, assembled and landed with the calls it paid for."""

    def on_persona_done(dag: PersonaDag) -> None:
        runtime.require_mostly_ok(
            dag.calls
        )  # before landing: a persona whose steps mostly failed stops the run
        assembly = assemble(dag, config.name)
        landed = (
            None
            if assembly is None
            else land_persona_task(
                warehouse_path, as_is(assembly), tally.benchmark_id, as_is(dag.calls)
            )
        )
        tally.add(dag, assembly, landed)
        progress.advance(
            "generation: personas",
            tally.landed + tally.unchanged + (landed is None),
            tally.personas,
        )

    progress.advance("generation: personas", 0, config.generation.personas)
    with progress.staged("generation"):
        run_pooled(new_dags(config), cached_steps(), on_persona_done, config.generation.workers)


def persona_dag(config: RunConfig, persona_index: int) -> PersonaDag:
    """Persona ``persona_index`` of the config, not yet generated (a flow parameter: a clear error outside the range)."""
    dags = [d for d in new_dags(config) if d.spec.index == persona_index]
    if not dags:
        raise ValueError(
            f"flow parameter `persona_index`: {persona_index} is outside 0..{config.generation.personas - 1}"
        )
    return dags[0]


def generate_bundle(
    bundle_path: str, config: RunConfig, dag: PersonaDag, run_id: str
) -> PersonaBundleResult:
    """Generate one persona (each step cached) and write its rows, with the calls it paid for, to a bundle
    at ``bundle_path`` (a local path or any fsspec URL)."""
    done: list[PersonaDag] = []
    run_pooled([dag], cached_steps(), done.append, config.generation.workers)
    return write_bundle(bundle_path, config, done[0], assemble(done[0], config.name), run_id)


# -- landing (through this process's writer; the CLI holds the writer lock for the whole command) -----


@task(cache_policy=NO_CACHE, task_run_name="benchmark {config.name}")
def ensure_benchmark_task(warehouse_path: str, config: RunConfig) -> bool:
    """Create or update the benchmark's row; whether anything was written."""
    with Warehouse.open_writer(warehouse_path) as wh:
        return ensure_benchmark(wh, config)


@task(cache_policy=NO_CACHE, task_run_name="land {assembly.rows.persona_id}")
def land_persona_task(
    warehouse_path: str, assembly: Assembly, benchmark_id: str, calls: Sequence[CallRecord]
) -> bool:
    """One finished persona, with the calls it paid for, in one transaction; False when unchanged."""
    with Warehouse.open_writer(warehouse_path) as wh:
        return land_persona(wh, assembly, benchmark_id, calls)


@task(cache_policy=NO_CACHE, task_run_name="record {run.kind} run")
def record_run_task(
    warehouse_path: str,
    run: RunRecord,
    failures: Sequence[FailureRecord] = (),
    calls: Sequence[CallRecord] = (),
) -> None:
    """The run's final row, with its ``calls`` that no landing took (:func:`clonemem.tasks.runs.finish_run`)."""
    with Warehouse.open_writer(warehouse_path) as wh:
        finish_run(wh, run, failures, calls)
