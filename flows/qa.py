"""Stage IV flow: segments from the warehouse, candidate items as concurrent cached steps, landing."""

from __future__ import annotations

import time

from prefect import flow
from prefect.task_runners import ThreadPoolTaskRunner

from clonemem import progress, runtime
from clonemem.ids import benchmark_id
from clonemem.qa.land import qa_rows
from clonemem.qa.report import QATally, cap_per_persona, candidates
from clonemem.schemas import question_types
from clonemem.schemas.config import RunConfig, resolve_config
from clonemem.schemas.results import QAResult
from clonemem.tasks.caching import step_pool, step_store
from clonemem.tasks.context import flow_run_ids, new_run_id
from clonemem.runtime import require_mostly_ok
from clonemem.tasks.generation import record_run_task
from clonemem.tasks.runs import begin_run_task, opener, tracked
from clonemem.tasks.qa import cached_qa_item, cue_stats_task, land_qa_task, segments_task
from clonemem.tasks.reporting import publish_qa
from clonemem.warehouse.runs import RunRecord, stops_run, utcnow


@flow(name="qa", task_runner=ThreadPoolTaskRunner(max_workers=32))
def qa_flow(warehouse_path: str, config: RunConfig | str | None = None) -> QAResult:
    """Questions for every persona of the config's benchmark, landed persona by persona."""
    cfg = resolve_config(config)
    bid = benchmark_id(cfg.name)
    started, started_at = time.perf_counter(), utcnow()
    flow_run_id, deployment_id = flow_run_ids()
    run_id = flow_run_id or new_run_id()
    tally = QATally(bid, run_id)
    run = begin_run_task(warehouse_path, RunRecord(run_id, "qa", bid, started_at, flow_run_id=flow_run_id,
                                                   deployment_id=deployment_id))
    rt = runtime.Runtime(cfg, run_id=run_id, warehouse=warehouse_path, on_start=opener(warehouse_path, run))
    with tracked(warehouse_path, run), runtime.use(rt), step_pool(32) as pool:
        store = step_store()
        personas = segments_task(warehouse_path, bid, cfg.qa)
        for n, persona in enumerate(personas):
            cands = candidates(persona.segments, question_types.names(), cfg.qa.types_per_segment,
                               cfg.qa.questions_per_type)
            futures = [pool.submit(cached_qa_item, store, seg, qtype, cfg.qa.distractor_rounds) for seg, qtype in cands]
            results, calls = [], []
            for i, ((seg, qtype), fut) in enumerate(zip(cands, futures), 1):
                progress.advance(f"stage IV: items of persona {n + 1}/{len(personas)}", i, len(cands))
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
                tally.count_calls(paid.calls, cached=paid.from_cache(run_id))
            require_mostly_ok(calls)  # before landing: a persona whose checks mostly failed stops the run
            results = cap_per_persona(results, cfg.qa.max_questions_per_persona)
            tally.add(persona.segments, results)
            rows = qa_rows(persona.persona_id, bid, persona.segments, results, persona.arc_ids)
            tally.landed += land_qa_task(warehouse_path, persona.persona_id, bid, rows, tally.snapshot(), calls)
    result = tally.result(cue_stats_task(warehouse_path, bid), time.perf_counter() - started)
    if result.landed or result.llm_calls or result.failed_items or run.resumed_from:
        # a run that changed nothing writes nothing (the warehouse stays byte-for-byte the same)
        record_run_task(warehouse_path, run.finished("completed", summary_json=result.model_dump_json()))
    publish_qa(result, cfg.name)
    return result
