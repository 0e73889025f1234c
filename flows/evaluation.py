"""Evaluation flow (SPEC §5): score memory systems on a gated benchmark and land the results."""

from __future__ import annotations

import datetime as dt
import json
import time
import uuid

import polars as pl
from prefect import flow
from prefect.task_runners import ThreadPoolTaskRunner

from clonemem import runtime
from clonemem.evaluation import metrics as M
from clonemem.faults import checkpoint
from clonemem.evaluation.run import load_benchmark, percentile, question_metrics, retrieved_json
from clonemem.memory import SYSTEMS
from clonemem.warehouse.catalog import resolve_benchmark
from clonemem.schemas.config import RunConfig
from clonemem.tasks.evaluation import answer_task, retrieve_task
from clonemem.warehouse import Warehouse
from clonemem.warehouse.sinks import BufferedWarehouseSink

EFFICIENCY = ("context_tokens", "build_seconds", "retrieval_p50_ms", "retrieval_p95_ms", "llm_calls", "llm_tokens")


class EvaluationRefused(RuntimeError):
    """The benchmark has not passed the gate (and --force was not given)."""


def require_gate(wh: Warehouse, benchmark: str, force: bool) -> tuple[str, str]:
    """(id, name) of a benchmark that may be evaluated: gate passed, or forced."""
    bid, name = resolve_benchmark(wh, benchmark)
    status = wh.scalar("SELECT gate_status FROM benchmarks WHERE benchmark_id = ?", [bid])
    if status != "passed" and not force:
        raise EvaluationRefused(f"benchmark {name!r} has gate status {status!r}: run `clonemem gate {name}` "
                                "first, or pass --force to evaluate anyway")
    return bid, name


@flow(name="evaluate", task_runner=ThreadPoolTaskRunner(max_workers=8))
def evaluate_flow(config: dict, warehouse_path: str, benchmark: str, systems: list[str], ks: list[int],
                  force: bool = False) -> dict:
    cfg = RunConfig.model_validate(config)
    for name in systems:
        SYSTEMS.get(name)  # unknown names fail here, before any work
    started = time.perf_counter()
    started_at = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    eval_id = str(uuid.uuid4())
    wh = Warehouse.open_writer(warehouse_path)
    try:
        bid, name = require_gate(wh, benchmark, force)
        personas = load_benchmark(wh, bid)
        sink = BufferedWarehouseSink(wh)
        k_max = max(ks)
        with runtime.use(runtime.Runtime(cfg, sink=sink, run_id=eval_id)):
            retrievals = {(s, p.persona_id): retrieve_task.submit(s, p, k_max) for s in systems for p in personas}
            retrievals = {key: fut.result() for key, fut in retrievals.items()}
            answers = {(s, k, p.persona_id): answer_task.submit(s, k, p, retrievals[(s, p.persona_id)])
                       for s in systems for k in ks for p in personas}
            answers = {key: fut.result() for key, fut in answers.items()}
        sink.flush()
        per_q, answer_rows, judge_rows, retrieval_rows = [], [], [], []
        for p in personas:
            for s in systems:
                r = retrievals[(s, p.persona_id)]
                retrieval_rows += [{"eval_run_id": eval_id, "system": s, "question_id": q.question_id,
                                    "retrieved_trace_ids": retrieved_json(r, q.question_id),
                                    "latency_ms": r.results[q.question_id][2]} for q in p.questions]
                for k in ks:
                    outcomes = {o.question_id: o for o in answers[(s, k, p.persona_id)]}
                    for q in p.questions:
                        o = outcomes[q.question_id]
                        per_q.append({**question_metrics(s, k, q, r, o), "context_tokens": o.context_tokens})
                        answer_rows.append({"eval_run_id": eval_id, "system": s, "k": k, "question_id": q.question_id,
                                            "context_tokens": o.context_tokens, "answer_text": o.answer_text,
                                            "predicted_choice_id": o.predicted_choice_id,
                                            "is_offline": cfg.models.ref("answerer").provider == "offline"})
                        for metric in ("qa_consistency", "mem_covered", "mem_helpful"):
                            judge_rows.append({"eval_run_id": eval_id, "system": s, "k": k, "question_id": q.question_id,
                                               "metric": metric, "score": o.judge.get(metric),
                                               "scored": metric in o.judge, "reason": o.unscored_reason})
        frame = pl.DataFrame(per_q, infer_schema_length=None)
        stats = _system_stats(systems, personas, retrievals)
        aggregates = {g: M.aggregate(frame, cols, cfg.evaluation.bootstrap_samples, cfg.seed)
                      for g, cols in (("all", []), ("persona", ["persona_id"]), ("question_type", ["question_type"]),
                                      ("dimension", ["dimension"]))}
        result = _contract(frame, aggregates, stats, systems, ks, name, bid, eval_id, cfg)
        with wh.transaction():
            wh.upsert("eval_runs", [{"eval_run_id": eval_id, "benchmark_id": bid, "run_id": eval_id, "forced": force,
                                     "config_json": json.dumps({"systems": systems, "k": ks, "models": cfg.models.model_dump()}),
                                     "started_at": started_at, "finished_at": dt.datetime.now(dt.UTC).replace(tzinfo=None)}])
            wh.upsert("eval_retrievals", retrieval_rows)
            wh.upsert("eval_answers", answer_rows)
            wh.upsert("eval_judgments", judge_rows)
            long = frame.unpivot(index=["system", "k", "question_id"], on=list(M.METRICS), variable_name="metric",
                                 value_name="value").with_columns(pl.lit(eval_id).alias("eval_run_id"))
            wh.upsert("eval_question_metrics", long)
            wh.upsert("eval_system_stats", [{"eval_run_id": eval_id, "system": s, **{k: v for k, v in st.items()
                                                                                       if k != "context_tokens"}}
                                            for s, st in stats.items()])
            for group, agg in aggregates.items():
                if agg.height:
                    group_cols = [c for c in agg.columns if c not in ("system", "k", "metric", "n", "value", "ci_low", "ci_high")]
                    value = pl.concat_str([pl.col(c).cast(pl.Utf8) for c in group_cols]) if group_cols else pl.lit("all")
                    wh.upsert("eval_metrics", agg.with_columns(pl.lit(eval_id).alias("eval_run_id"), pl.lit(group).alias("group_by"),
                                                               value.alias("group_value")).drop(group_cols))
            checkpoint("evaluation.landing")  # fault hook: a kill here leaves nothing of this evaluation
    finally:
        wh.close()
    result["seconds"] = round(time.perf_counter() - started, 2)
    return result


def _system_stats(systems, personas, retrievals) -> dict[str, dict]:  # noqa: ANN001
    out = {}
    for s in systems:
        rs = [retrievals[(s, p.persona_id)] for p in personas]
        latencies = [lat for r in rs for (_t, _i, lat) in r.results.values()]
        out[s] = {"build_seconds": sum(r.build_seconds for r in rs), "retrieval_p50_ms": percentile(latencies, 50),
                  "retrieval_p95_ms": percentile(latencies, 95), "llm_calls": sum(r.llm_calls for r in rs),
                  "llm_tokens": sum(r.llm_tokens for r in rs)}
    return out


def _contract(frame: pl.DataFrame, aggregates: dict, stats: dict, systems: list[str], ks: list[int], name: str,
              bid: str, eval_id: str, cfg: RunConfig) -> dict:
    """The `evaluate --json` shape (SPEC §6): results per (system, k), and per question type."""
    def entry(agg: pl.DataFrame, extra: dict, sub: pl.DataFrame) -> dict:
        values = {r["metric"]: r for r in agg.iter_rows(named=True)}
        out = {**extra, "n_questions": sub.height}
        for metric in M.METRICS:
            row = values.get(metric)
            out[metric] = None if row is None else row["value"]
            out[f"{metric}_ci"] = None if row is None or row["ci_low"] is None else [row["ci_low"], row["ci_high"]]
        return out

    results, by_type = [], []
    agg_all, agg_type = aggregates["all"], aggregates["question_type"]
    for s in systems:
        for k in ks:
            sub = frame.filter((pl.col("system") == s) & (pl.col("k") == k))
            a = agg_all.filter((pl.col("system") == s) & (pl.col("k") == k)) if agg_all.height else agg_all
            e = entry(a, {"system": s, "k": k}, sub)
            e["context_tokens"] = float(sub["context_tokens"].mean()) if sub.height else None
            e.update({m: stats[s][m] for m in EFFICIENCY if m != "context_tokens"})
            results.append(e)
            for qtype in sorted(set(sub["question_type"].to_list())):
                tsub = sub.filter(pl.col("question_type") == qtype)
                ta = agg_type.filter((pl.col("system") == s) & (pl.col("k") == k) & (pl.col("question_type") == qtype))
                by_type.append(entry(ta, {"system": s, "k": k, "question_type": qtype}, tsub))
    return {"benchmark": name, "benchmark_id": bid, "eval_run_id": eval_id,
            "offline": cfg.models.ref("answerer").provider == "offline" or cfg.models.ref("judge").provider == "offline",
            "results": results, "by_question_type": by_type}
