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

from clonemem import runtime
from clonemem.schemas.config import RunConfig, resolve_config
from clonemem.schemas.results import GenerationResult, PersonaBundleResult
from clonemem.tasks.context import flow_run_ids, new_run_id
from clonemem.tasks.generation import (
    ensure_benchmark_task,
    generate_and_land,
    generate_bundle,
    generation_tally,
    persona_dag,
    record_run_task,
)
from clonemem.tasks.reporting import log
from clonemem.tasks.runs import begin_run_task, flow_run_record, opener, tracked


# The LLM steps run on a pool of the config's `generation.workers` threads (tasks/generation.py); the
# flow's own tasks (the benchmark row, a landing per persona, the run record) run one at a time.
@flow(name="generate-benchmark")
def generate_flow(warehouse_path: str, config: RunConfig | str | None = None) -> GenerationResult:
    """Generate every persona of the config concurrently and land each as soon as it is complete."""
    cfg = resolve_config(config)
    started, begun = time.perf_counter(), flow_run_record("generate", cfg)
    changed = ensure_benchmark_task(warehouse_path, cfg)
    run = begin_run_task(warehouse_path, begun)
    tally = generation_tally(cfg, run.run_id)
    rt = runtime.Runtime(
        cfg, run_id=run.run_id, warehouse=warehouse_path, on_start=opener(warehouse_path, run)
    )
    with tracked(warehouse_path, run, rt.made), runtime.use(rt):
        generate_and_land(warehouse_path, cfg, tally)
    result = tally.result(time.perf_counter() - started)
    if changed or result.landed or result.llm_calls or result.failures or run.resumed_from:
        # a run that changed nothing writes nothing, so the warehouse stays byte-for-byte the same
        record_run_task(
            warehouse_path,
            run.finished("completed", summary_json=result.model_dump_json()),
            tally.failure_records(),
            rt.made(),
        )  # with the calls of personas that failed
    log(result.summary())
    return result


def run_generation(cfg: RunConfig, warehouse: str) -> GenerationResult:
    """Run :func:`generate_flow` (the config sizes its step pool)."""
    return generate_flow(str(warehouse), cfg)


@flow(name="generate-persona")
def generate_persona_flow(
    persona_index: int, bundle_path: str, config: RunConfig | str | None = None
) -> PersonaBundleResult:
    """Scale-out unit: generate one persona and write its rows to a bundle at ``bundle_path`` (a local
    path or any fsspec URL: ``s3://…``, ``gs://…``) for `clonemem land` or ``generate_distributed_flow``."""
    cfg = resolve_config(config)
    dag = persona_dag(cfg, persona_index)
    run_id = flow_run_ids()[0] or new_run_id()
    with runtime.use(runtime.Runtime(cfg, run_id=run_id)):
        return generate_bundle(bundle_path, cfg, dag, run_id)
