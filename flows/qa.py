"""Stage IV flow: segments from the warehouse, candidate items as concurrent cached tasks, landing."""

from __future__ import annotations

import time
from collections import Counter

from prefect import flow
from prefect.task_runners import ThreadPoolTaskRunner

from clonemem import runtime
from clonemem.qa.land import cue_stats, land_qa, qa_rows
from clonemem.qa.pipeline import ItemResult
from clonemem.qa.segments import persona_segments
from clonemem.ids import benchmark_id
from clonemem.schemas.config import QUESTION_TYPES, RunConfig
from clonemem.schemas.qa import Segment
from clonemem.tasks.qa import qa_item
from clonemem.warehouse import Warehouse
from clonemem.warehouse.sinks import BufferedWarehouseSink


def candidates(segments: list[Segment], types_per_segment: int, quotas: dict[str, int]) -> list[tuple[Segment, str]]:
    """Question types rotate over segments, so every type is tried on several segments and windows."""
    out = []
    for j, seg in enumerate(segments):
        for t in range(types_per_segment):
            qtype = QUESTION_TYPES[(j * types_per_segment + t) % len(QUESTION_TYPES)]
            if quotas.get(qtype, 1) > 0:
                out.append((seg, qtype))
    return out


def cap_per_persona(results: list[ItemResult], cap: int) -> list[ItemResult]:
    kept, accepted = [], 0
    for r in results:
        if r.status == "accepted":
            if accepted >= cap:
                continue
            accepted += 1
        kept.append(r)
    return kept


@flow(name="qa", task_runner=ThreadPoolTaskRunner(max_workers=32))
def qa_flow(config: dict, warehouse_path: str) -> dict:
    cfg = RunConfig.model_validate(config)
    bid = benchmark_id(cfg.name)
    started = time.perf_counter()
    wh = Warehouse.open_writer(warehouse_path)
    sink = BufferedWarehouseSink(wh)
    summary: dict = {"benchmark_id": bid, "status": Counter(), "rejected_by": Counter(), "by_type": Counter(),
                     "by_dimension": Counter(), "failed_items": [], "landed": 0}
    try:
        with runtime.use(runtime.Runtime(cfg, sink=sink)):
            for (pid,) in wh.rows("SELECT persona_id FROM personas WHERE benchmark_id = ? ORDER BY seq", [bid]):
                segments = persona_segments(wh, pid, cfg.qa)
                cands = candidates(segments, cfg.qa.types_per_segment, cfg.qa.questions_per_type)
                futures = [qa_item.submit(seg, qtype, cfg.qa.distractor_rounds) for seg, qtype in cands]
                results = []
                for (seg, qtype), fut in zip(cands, futures):
                    try:
                        results.append(fut.result())
                    except Exception as exc:  # an item that keeps failing: recorded, the rest goes on
                        summary["failed_items"].append({"segment": seg.segment_id, "type": qtype, "error": str(exc)})
                results = cap_per_persona(results, cfg.qa.max_questions_per_persona)
                arc_ids = dict(wh.rows("SELECT 'A' || (seq + 1), arc_id FROM life_arcs WHERE persona_id = ?", [pid]))
                for r in results:
                    summary["status"][r.status] += 1
                    if r.status == "rejected":
                        summary["rejected_by"][r.rejected_stage] += 1
                    if r.status == "accepted":
                        summary["by_type"][r.question_type] += 1
                        summary["by_dimension"][next(s.arc.dimension for s in segments if s.segment_id == r.segment_id)] += 1
                persona_summary = {k: dict(v) if isinstance(v, Counter) else v for k, v in summary.items()}
                summary["landed"] += land_qa(wh, pid, bid, qa_rows(pid, bid, segments, results, arc_ids), persona_summary)
        sink.flush()
        written = summary["status"]["accepted"] + summary["status"]["rejected"]
        summary["rejection_rate"] = round(summary["status"]["rejected"] / written, 4) if written else None
        summary["cues"] = cue_stats(wh, bid)
        summary["llm_calls"] = sink.count
    finally:
        wh.close()
    summary["seconds"] = round(time.perf_counter() - started, 2)
    return {k: dict(v) if isinstance(v, Counter) else v for k, v in summary.items()}
