"""Generation flows (stages I–III). The flow only orchestrates: LLM steps run on a thread pool, each
cached on its own (``tasks/generation.py``) without a Prefect task run per step, the persona graphs
decide what is ready, finished personas are assembled and landed at once.

All personas of a run are driven by one loop inside one flow run, so independent personas never
wait for each other (Prefect's concurrent subflows in threads were measured several times slower
on 2 cores). ``generate_persona_flow`` generates a single persona into a bundle for scale-out.
"""

from __future__ import annotations

import time

from prefect import flow
from prefect.task_runners import ThreadPoolTaskRunner

from clonemem import progress, runtime
from clonemem.runtime import require_mostly_ok
from clonemem.generation.assemble import assemble
from clonemem.generation.bundle import write_bundle
from clonemem.generation.dag import PersonaDag
from clonemem.generation.execute import Step, new_dags, run_pooled
from clonemem.generation.report import GenerationTally
from clonemem.ids import benchmark_id
from clonemem.schemas.config import RunConfig, resolve_config
from clonemem.schemas.results import GenerationResult, PersonaBundleResult
from clonemem.tasks.caching import step_store
from clonemem.tasks.context import flow_run_ids, new_run_id
from clonemem.tasks.generation import cached_stage, ensure_benchmark_task, land_persona_task, record_run_task
from clonemem.tasks.runs import begin_run_task, opener, tracked
from clonemem.tasks.reporting import log
from clonemem.warehouse.runs import RunRecord, utcnow

WORKERS = 64


def _cached_steps() -> Step:
    """Steps served from (and stored in) the current run's result store."""
    store = step_store()
    return lambda stage, inp, item: cached_stage(store, stage.name, item, inp)


@flow(name="generate-benchmark", task_runner=ThreadPoolTaskRunner(max_workers=WORKERS))
def generate_flow(warehouse_path: str, config: RunConfig | str | None = None) -> GenerationResult:
    """Generate every persona of the config concurrently and land each as soon as it is complete."""
    cfg = resolve_config(config)
    started, started_at = time.perf_counter(), utcnow()
    flow_run_id, deployment_id = flow_run_ids()
    run_id = flow_run_id or new_run_id()
    bid = benchmark_id(cfg.name)
    changed = ensure_benchmark_task(warehouse_path, cfg)
    run = begin_run_task(warehouse_path, RunRecord(
        run_id, "generate", bid, started_at, flow_run_id=flow_run_id, deployment_id=deployment_id,
        config_json=cfg.model_dump_json(exclude={"warehouse"})))
    tally = GenerationTally(bid, cfg.name, cfg.generation.personas, run_id)
    progress.advance("generation: personas", 0, cfg.generation.personas)

    def on_persona_done(dag: PersonaDag) -> None:
        require_mostly_ok(dag.calls)  # before landing: a persona whose steps mostly failed stops the run
        assembly = assemble(dag, cfg.name)
        landed = None if assembly is None else land_persona_task(warehouse_path, assembly, bid, dag.calls)
        tally.add(dag, assembly, landed)
        progress.advance("generation: personas", tally.landed + tally.unchanged + (landed is None), tally.personas)

    rt = runtime.Runtime(cfg, run_id=run_id, warehouse=warehouse_path, on_start=opener(warehouse_path, run))
    with tracked(warehouse_path, run), runtime.use(rt):
        run_pooled(new_dags(cfg), _cached_steps(), on_persona_done, cfg.generation.workers)
    result = tally.result(time.perf_counter() - started)
    if changed or result.landed or result.llm_calls or result.failures or run.resumed_from:
        # a run that changed nothing writes nothing, so the warehouse stays byte-for-byte the same
        record_run_task(warehouse_path, run.finished("completed", summary_json=result.model_dump_json()),
                        tally.failure_records())
    log(result.summary())
    return result


def run_generation(cfg: RunConfig, warehouse: str) -> GenerationResult:
    """Run :func:`generate_flow` with the config's worker count."""
    runner = ThreadPoolTaskRunner(max_workers=cfg.generation.workers)
    return generate_flow.with_options(task_runner=runner)(str(warehouse), cfg)


@flow(name="generate-persona", task_runner=ThreadPoolTaskRunner(max_workers=WORKERS))
def generate_persona_flow(persona_index: int, bundle_path: str, config: RunConfig | str | None = None) -> PersonaBundleResult:
    """Scale-out unit: generate one persona and write its rows to a bundle at ``bundle_path`` (a local
    path or any fsspec URL: ``s3://…``, ``gs://…``) for `clonemem land` or ``generate_distributed_flow``."""
    cfg = resolve_config(config)
    dags = [d for d in new_dags(cfg) if d.spec.index == persona_index]
    if not dags:
        raise ValueError(f"flow parameter `persona_index`: {persona_index} is outside 0..{cfg.generation.personas - 1}")
    done: list[PersonaDag] = []
    run_id = flow_run_ids()[0] or new_run_id()
    with runtime.use(runtime.Runtime(cfg, run_id=run_id)):
        run_pooled(dags, _cached_steps(), done.append, cfg.generation.workers)
    return write_bundle(bundle_path, cfg, done[0], assemble(done[0], cfg.name), run_id)
