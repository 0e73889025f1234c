"""An evaluation run into the warehouse: per-question rows, aggregates and efficiency, in one
transaction with the LLM calls it paid for (a killed run leaves nothing of itself)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import polars as pl

from clonemem.evaluation.protocols.score import ProtocolLanding
from clonemem.evaluation.run import (
    EvalQuestion,
    Outcome,
    PersonaData,
    Retrieval,
    percentile,
    question_metrics,
    retrieved_items_json,
    retrieved_json,
)
from clonemem.faults import checkpoint
from clonemem.llm.types import CallRecord
from clonemem.schemas.config import RunConfig
from clonemem.schemas.results import AGGREGATED, Provenance
from clonemem.warehouse import Warehouse
from clonemem.warehouse.landing import new_calls
from clonemem.warehouse.protocols import land_protocols
from clonemem.warehouse.runs import adopt_runs

N = TypeVar("N", int, float)
CALLS_PER_BATCH = (
    1000  # LLM call rows landed per insert (the call ids are unique: batches never overlap)
)

Retrievals = Mapping[tuple[str, str], Retrieval]  # (system, persona id) -> retrieval
Answers = Mapping[tuple[str, int, str], Sequence[Outcome]]  # (system, k, persona id) -> outcomes


@dataclass(frozen=True)
class EvaluationRun:
    """What identifies one evaluation: the run, the benchmark, what was asked for, with which models."""

    eval_run_id: str
    benchmark_id: str
    benchmark: str
    systems: tuple[str, ...]
    ks: tuple[int, ...]
    force: bool
    config: RunConfig
    started_at: dt.datetime
    flow_run_id: str | None = None
    # per system, provenance its class cannot carry: a results file's name and sha256 (merged into `extra`)
    provenance: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # per system, how it was fed its history: `replay` or `in_process` (``replay.retrieval_mode``)
    modes: Mapping[str, str] = field(default_factory=dict)
    content_hash: str | None = (
        None  # the benchmark's content as evaluated, before any sample (``content_digest``)
    )
    sample: Mapping[str, object] | None = (
        None  # a quick run's questions (``sample.SampleSpec``); None: all
    )

    @property
    def offline(self) -> bool:
        return "offline" in (
            self.config.models.ref("answerer").provider,
            self.config.models.ref("judge").provider,
        )


@dataclass(frozen=True)
class EvaluationRows:
    per_question: (
        pl.DataFrame
    )  # one row per (system, k, question): every metric, and the context size
    retrievals: list[dict]
    answers: list[dict]
    judgments: list[dict]
    privacy_verdicts: list[dict] = dataclasses.field(
        default_factory=list
    )  # per item of a privacy task


def evaluation_rows(
    run: EvaluationRun, personas: Sequence[PersonaData], retrievals: Retrievals, answers: Answers
) -> EvaluationRows:
    per_q, answer_rows, judge_rows, retrieval_rows, privacy_rows = [], [], [], [], []
    answerer_offline = run.config.models.ref("answerer").provider == "offline"
    for p in personas:
        for s in run.systems:
            r = retrievals[(s, p.persona_id)]
            retrieval_rows += [
                {
                    "eval_run_id": run.eval_run_id,
                    "system": s,
                    "question_id": q.question_id,
                    "retrieved_trace_ids": retrieved_json(r, q.question_id),
                    "items": retrieved_items_json(r, q.question_id),
                    "latency_ms": r.results[q.question_id].latency_ms,
                }
                for q in p.questions
            ]
            for k in run.ks:
                outcomes = {o.question_id: o for o in answers[(s, k, p.persona_id)]}
                for q in p.questions:
                    o = outcomes[q.question_id]
                    per_q.append(
                        {**question_metrics(s, k, q, r, o), "context_tokens": o.context_tokens}
                    )
                    answer_rows.append(
                        {
                            "eval_run_id": run.eval_run_id,
                            "system": s,
                            "k": k,
                            "question_id": q.question_id,
                            "context_tokens": o.context_tokens,
                            "answer_text": o.answer_text,
                            "predicted_choice_id": o.predicted_choice_id,
                            "is_offline": answerer_offline,
                        }
                    )
                    for metric in ("qa_consistency", "mem_covered", "mem_helpful"):
                        judge_rows.append(
                            {
                                "eval_run_id": run.eval_run_id,
                                "system": s,
                                "k": k,
                                "question_id": q.question_id,
                                "metric": metric,
                                "score": o.judge.get(metric),
                                "scored": metric in o.judge,
                                "reason": o.unscored_reason,
                            }
                        )
                    privacy_rows += _privacy_verdicts(run.eval_run_id, s, k, q, o)
    return EvaluationRows(
        pl.DataFrame(per_q, infer_schema_length=None),
        retrieval_rows,
        answer_rows,
        judge_rows,
        privacy_rows,
    )


def _privacy_verdicts(eid: str, system: str, k: int, q: EvalQuestion, o: Outcome) -> list[dict]:
    """The judge's verdict on each item of a privacy task (none when unscored: its reason is the answer's)."""
    if q.privacy is None or not o.privacy:
        return []
    return [
        {
            "eval_run_id": eid,
            "system": system,
            "k": k,
            "question_id": q.question_id,
            "evidence_id": eid_,
            "role": role,
            "present": present,
            "reason": o.privacy.get("reason"),
        }
        for role, ids, flags in (
            ("necessary", q.privacy.necessary_ids, o.privacy["conveyed"]),
            ("sensitive", q.privacy.sensitive_ids, o.privacy["disclosed"]),
        )
        for eid_, present in zip(ids, flags, strict=True)
    ]


def system_stats(
    systems: Sequence[str], personas: Sequence[PersonaData], retrievals: Retrievals
) -> dict[str, dict]:
    """Efficiency per system: build time, retrieval latency, the system's own LLM spend."""
    out = {}
    for s in systems:
        rs = [retrievals[(s, p.persona_id)] for p in personas]
        latencies = [lat for r in rs for (_t, _i, lat) in r.results.values() if lat is not None]
        coverage = [r.write_coverage for r in rs if r.write_coverage is not None]
        traces = [len(p.traces) for p, r in zip(personas, rs) if r.write_coverage is not None]
        out[s] = {
            "build_seconds": _total([r.build_seconds for r in rs]),
            "retrieval_p50_ms": percentile(latencies, 50),
            "retrieval_p95_ms": percentile(latencies, 95),
            "llm_calls": _total([r.llm_calls for r in rs]),
            "llm_tokens": _total([r.llm_tokens for r in rs]),
            # over all personas' traces (each persona weighted by its traces); None if unknown
            "write_coverage": (
                sum(c * n for c, n in zip(coverage, traces)) / sum(traces)
                if coverage and sum(traces)
                else None
            ),
        }
    return out


def _total(values: Sequence[N | None]) -> N | None:
    """The sum, or None when a part is unknown (a results file's build time and spend)."""
    known = [v for v in values if v is not None]
    return sum(known[1:], known[0]) if known and len(known) == len(values) else None


def _config_json(run: EvaluationRun) -> str:
    ev = run.config.evaluation
    return json.dumps(
        {
            "systems": list(run.systems),
            "k": list(run.ks),
            "models": run.config.models.model_dump(),
            "aggregation": {
                "aggregate": ev.aggregate,
                "exclude_no_evidence": ev.exclude_no_evidence,
            },
        }
    )


def content_digest(personas: Sequence[PersonaData]) -> str:
    """The digest of a benchmark's content as evaluated (personas, traces, questions, evidence): two
    evaluations with one digest asked the same questions of the same histories."""
    digest = hashlib.sha256()
    for p in personas:
        digest.update(
            json.dumps(
                dataclasses.asdict(p), sort_keys=True, default=str, ensure_ascii=False
            ).encode("utf-8")
            + b"\n"
        )
    return digest.hexdigest()[:32]


def fingerprint(
    run: EvaluationRun,
    personas: Sequence[PersonaData],
    rows: EvaluationRows,
    stats: Mapping[str, Mapping],
    aggregates: Mapping[str, pl.DataFrame],
    provenance: Provenance | None,
    protocols: ProtocolLanding | None = None,
) -> str:
    """The digest of an evaluation's inputs (the benchmark's content as evaluated, systems, k, config,
    seed, provenance) and of its results (per-question rows, retrievals, answers, verdicts, efficiency,
    aggregates) — not of its ids or times. Two evaluations with one fingerprint are the same evaluation."""
    digest = hashlib.sha256()

    def feed(obj: object) -> None:
        digest.update(
            json.dumps(obj, sort_keys=True, default=str, ensure_ascii=False).encode("utf-8") + b"\n"
        )

    feed(
        {
            "benchmark_id": run.benchmark_id,
            "forced": run.force,
            "config": _config_json(run),
            "seed": run.config.seed,
            "evaluation": run.config.evaluation.model_dump(mode="json"),
            "modes": dict(run.modes),
            "sample": None if run.sample is None else dict(run.sample),
            "provenance": None if provenance is None else provenance.model_dump(mode="json"),
        }
    )
    for p in personas:
        feed(dataclasses.asdict(p))
    for table in (rows.retrievals, rows.answers, rows.judgments, rows.privacy_verdicts):
        for row in table:
            feed({k: v for k, v in row.items() if k != "eval_run_id"})
    feed(rows.per_question.write_json())
    feed({s: dict(st) for s, st in stats.items()})
    for group in sorted(aggregates):
        feed([group, aggregates[group].write_json()])
    if protocols is not None:  # the standard protocols' scores, answers and groups
        feed([protocols.scores, protocols.answers, protocols.groups])
    return digest.hexdigest()[:32]


def identical_latest(wh: Warehouse, benchmark_id: str, digest: str) -> str | None:
    """The benchmark's latest stored evaluation if its fingerprint is ``digest`` (else None)."""
    latest = wh.rows(
        "SELECT eval_run_id, fingerprint FROM eval_runs WHERE benchmark_id = ? "
        "ORDER BY started_at DESC, eval_run_id DESC LIMIT 1",
        [benchmark_id],
    )
    return latest[0][0] if latest and latest[0][1] == digest else None


def land_evaluation(
    wh: Warehouse,
    run: EvaluationRun,
    rows: EvaluationRows,
    stats: Mapping[str, Mapping],
    aggregates: Mapping[str, pl.DataFrame],
    calls: Sequence[CallRecord] = (),
    provenance: Provenance | None = None,
    digest: str | None = None,
    protocols: ProtocolLanding | None = None,
) -> str | None:
    """Everything of one evaluation, with the LLM calls it made and where its numbers came from, in one
    transaction. Given its ``digest`` (:func:`fingerprint`): an evaluation identical to the benchmark's
    latest stored one that made no new call (every step served from the cache) is not landed again, and
    the earlier evaluation's id is returned; otherwise None (landed under ``run.eval_run_id``)."""
    eid = run.eval_run_id
    calls = new_calls(wh, calls)
    if digest is not None and not calls:
        earlier = identical_latest(wh, run.benchmark_id, digest)
        if earlier is not None:
            return earlier
    with wh.transaction():
        wh.upsert(
            "eval_runs",
            [
                {
                    "eval_run_id": eid,
                    "benchmark_id": run.benchmark_id,
                    "run_id": run.flow_run_id or eid,
                    "forced": run.force,
                    "config_json": _config_json(run),
                    "provenance_json": None if provenance is None else provenance.model_dump_json(),
                    "fingerprint": digest,
                    "content_hash": run.content_hash,
                    "sample_json": None if run.sample is None else json.dumps(dict(run.sample)),
                    "started_at": run.started_at,
                    "finished_at": dt.datetime.now(dt.UTC).replace(tzinfo=None),
                }
            ],
        )
        wh.upsert("eval_retrievals", rows.retrievals)
        wh.upsert("eval_answers", rows.answers)
        wh.upsert("eval_judgments", rows.judgments)
        if rows.privacy_verdicts:
            wh.upsert("eval_privacy_verdicts", rows.privacy_verdicts)
        metrics = [
            m for m in AGGREGATED if m in rows.per_question.columns
        ]  # a column each; the view unpivots
        wh.upsert(
            "eval_question_scores",
            rows.per_question.select(
                pl.lit(eid).alias("eval_run_id"),
                "system",
                "k",
                "question_id",
                *[pl.col(m).cast(pl.Float64) for m in metrics],
            ),
        )
        wh.upsert(
            "eval_system_stats",
            [
                {"eval_run_id": eid, "system": s, **st, "retrieval_mode": run.modes.get(s)}
                for s, st in stats.items()
            ],
        )
        for group, agg in aggregates.items():
            if agg.height:
                group_cols = [
                    c
                    for c in agg.columns
                    if c not in ("system", "k", "metric", "n", "value", "ci_low", "ci_high")
                ]
                value = (
                    pl.concat_str([pl.col(c).cast(pl.Utf8) for c in group_cols])
                    if group_cols
                    else pl.lit("all")
                )
                wh.upsert(
                    "eval_metrics",
                    agg.with_columns(
                        pl.lit(eid).alias("eval_run_id"),
                        pl.lit(group).alias("group_by"),
                        value.alias("group_value"),
                    ).drop(group_cols),
                )
        if protocols is not None:
            landed = protocols.with_run(eid)
            land_protocols(wh, landed.scores, landed.answers, landed.groups)
        land_calls(wh, calls)
        # calls of an evaluation killed before it landed, served from the cache: their run gets a row
        adopt_runs(
            wh, [c for c in calls if c.run_id != eid], "evaluate", run.benchmark_id, "interrupted"
        )
        checkpoint(
            "evaluation.landing"
        )  # fault hook: a kill here leaves nothing of this evaluation
    return None


def land_calls(wh: Warehouse, calls: Sequence[CallRecord]) -> int:
    """New calls' rows (``new_calls``: none is in the ledger yet), :data:`CALLS_PER_BATCH` at a time, in the
    caller's transaction if any. All at once, replacing by key, with the calls' stored prompts and replies,
    was the evaluation's peak memory: each batch's frame is now freed before the next, and a plain insert
    skips the replace's conflict handling."""
    with wh.transaction():
        return sum(
            wh.insert("llm_calls", [c.row() for c in calls[start : start + CALLS_PER_BATCH]])
            for start in range(0, len(calls), CALLS_PER_BATCH)
        )
