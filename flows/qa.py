"""Stage IV flow: segments from the warehouse, candidate items as concurrent cached steps, landing."""

from __future__ import annotations

import time

from prefect import flow

from clonemem import runtime
from clonemem.runtime import require_mostly_ok
from clonemem.schemas.config import RunConfig, resolve_config
from clonemem.schemas.results import QAResult
from clonemem.tasks.caching import step_store
from clonemem.tasks.generation import record_run_task
from clonemem.tasks.qa import (
    cue_stats_task,
    land_persona_items,
    persona_items,
    qa_tally,
    segments_task,
)
from clonemem.tasks.reporting import publish_qa
from clonemem.tasks.runs import begin_run_task, flow_run_record, opener, tracked


@flow(name="qa")  # its items run on a step pool of the config's `qa.workers` threads
def qa_flow(warehouse_path: str, config: RunConfig | str | None = None) -> QAResult:
    """Questions for every persona of the config's benchmark, landed persona by persona."""
    cfg = resolve_config(config)
    started, begun = time.perf_counter(), flow_run_record("qa", cfg, with_config=False)
    tally = qa_tally(cfg, begun.run_id)
    bid, run_id = tally.benchmark_id, begun.run_id
    run = begin_run_task(warehouse_path, begun)
    rt = runtime.Runtime(
        cfg, run_id=run_id, warehouse=warehouse_path, on_start=opener(warehouse_path, run)
    )
    with (
        tracked(warehouse_path, run, rt.made),
        runtime.use(rt),
        runtime.step_pool(cfg.qa.workers) as pool,
    ):
        store = step_store()
        personas = segments_task(warehouse_path, bid, cfg.qa)
        for n, persona in enumerate(personas):
            items = persona_items(
                pool,
                store,
                persona,
                cfg.qa,
                tally,
                f"stage IV: items of persona {n + 1}/{len(personas)}",
            )
            require_mostly_ok(
                items.calls
            )  # before landing: a persona whose checks mostly failed stops the run
            land_persona_items(warehouse_path, persona, items, cfg.qa, tally)
    result = tally.result(cue_stats_task(warehouse_path, bid), time.perf_counter() - started)
    if result.landed or result.llm_calls or result.failed_items or run.resumed_from:
        # a run that changed nothing writes nothing (the warehouse stays byte-for-byte the same)
        record_run_task(
            warehouse_path,
            run.finished("completed", summary_json=result.model_dump_json()),
            calls=rt.made(),
        )
    publish_qa(result, cfg.name)
    return result
