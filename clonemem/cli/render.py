"""What the commands print: summaries of imports, generation, stage IV, the gate and evaluations.

Text only; no command logic. Summaries go to stderr (the result a script reads goes to stdout).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from clonemem.cost import CostEstimate
    from clonemem.schemas.config import RunConfig
    from clonemem.schemas.imports import ImportSummary
    from clonemem.schemas.results import EvaluationResult, GateResult, GenerationResult, QAResult


def err(message: str) -> None:
    typer.echo(message, err=True)


def import_summary(summary: ImportSummary, warehouse: Path) -> None:
    verb = {"created": "imported", "replaced": "replaced", "appended": "appended to"}[summary.mode]
    typer.echo(f"{verb} benchmark {summary.name!r} ({summary.benchmark_id}) in {warehouse}")
    languages = ", ".join(f"{k} ×{v}" for k, v in summary.languages.items())
    typer.echo(
        f"  this import: personas {summary.personas}, traces {summary.traces}, questions "
        f"{summary.questions} ({summary.free_text_only} free-text only); languages {languages}"
    )
    if summary.mode == "appended":
        typer.echo(
            f"  benchmark now: personas {summary.total_personas}, traces {summary.total_traces}, "
            f"questions {summary.total_questions}"
        )
    if summary.relabelled:
        kinds = ", ".join(f"{k} ×{v}" for k, v in summary.relabelled.items())
        typer.echo(
            "  question types mapped to the project's (source label kept in source_question_type): "
            + kinds
        )
    if summary.unknown_question_types:
        kinds = ", ".join(f"{k} ×{v}" for k, v in sorted(summary.unknown_question_types.items()))
        typer.echo(f"  question types outside the declared ones, kept and flagged: {kinds}")
    if summary.evidence_without_traces:
        typer.echo(
            "  evidence items naming no trace (skipped by recall metrics): "
            f"{summary.evidence_without_traces}"
        )
    if summary.questions_without_evidence:
        typer.echo(
            f"  questions naming no evidence (score 0 on recall): {summary.questions_without_evidence}"
        )
    if summary.notes:
        counts = ", ".join(f"{k} ×{v}" for k, v in summary.note_counts.items())
        typer.echo(
            f"  evidence references repaired or unresolved (see table import_notes): {counts}"
        )
        for note in summary.notes[:10]:
            typer.echo(f"    {note}")
        if len(summary.notes) > 10:
            typer.echo(f"    ... and {len(summary.notes) - 10} more")


def estimate(got: CostEstimate, cfg: RunConfig) -> None:
    """The dry run's table: calls, tokens and cost per stage and role, and the total."""
    typer.echo(got.table())
    if cfg.max_cost_usd is not None and got.total_usd > cfg.max_cost_usd:
        err(
            f"note: the estimate (${got.total_usd:.4f}) is over --max-cost ${cfg.max_cost_usd:.4f}; "
            "the run would stop there (resumable)"
        )


def generation(s: GenerationResult, warehouse: Path) -> None:
    err(
        f"benchmark {s.name!r} in {warehouse}: {s.personas} persona(s), {s.landed} landed, "
        f"{s.unchanged} unchanged; {s.detailed_events} detailed events, {s.evidence} evidence, "
        f"{s.traces} traces; {s.llm_calls} LLM calls in {s.seconds:.1f} s"
    )
    if s.failures:
        err(f"{len(s.failures)} stage item(s) failed after retries:")
        for f in s.failures[:20]:
            err(f"  {f.persona} {f.stage} {f.item}: {f.error}")
    for d in s.dropped[:20]:
        err(f"  dropped {d}")


def qa(q: QAResult) -> None:
    err(
        f"stage IV: {q.status.get('accepted', 0)} questions accepted, {q.status.get('rejected', 0)} "
        f"rejected ({q.rejection_rate}), {q.status.get('infeasible', 0)} candidates infeasible; by "
        f"type {q.by_type}; by dimension {q.by_dimension}; {q.llm_calls} LLM calls"
    )
    cues = q.cues
    err(
        f"  superficial cues: longest option right {cues.longest_option_accuracy}, "
        f"word overlap right {cues.overlap_option_accuracy} (chance 0.25); correct letters "
        f"{cues.correct_letter_distribution}"
    )


def gate(g: GateResult) -> None:
    failed = g.failed
    err(
        f"gate {g.status}: {len(g.outcomes) - len(failed)}/{len(g.outcomes)} expectations met; "
        f"data docs: {g.data_docs}"
    )
    for o in failed:
        observed = json.dumps(o.observed, default=str)[:200]
        err(
            f"  FAILED {o.suite}: {o.expectation} (unexpected: {o.unexpected_count}, "
            f"observed: {observed})"
        )
        for row in o.failing_sample[:3]:
            err(f"    e.g. {json.dumps(row, default=str)[:300]}")


def reused(result: EvaluationResult) -> None:
    if result.reused:
        err(
            f"evaluation identical to the latest stored one of {result.benchmark!r} "
            f"({result.eval_run_id}: same benchmark content, systems, k, config, provenance and "
            "results, nothing newly computed): not stored again; its id is returned"
        )


def leaderboard(result: EvaluationResult) -> str:
    from clonemem.evaluation.report import leaderboard as table  # lazy: loads polars

    return table(result)


def evaluation(result: EvaluationResult) -> None:
    reused(result)
    typer.echo(leaderboard(result))
    if result.protocols:
        typer.echo(protocols(result))


def protocols(result: EvaluationResult) -> str:
    """The standard protocols' rows, one line each: the metrics with their 95% intervals."""
    from clonemem.schemas.results import PROTOCOL_METRICS

    lines = ["standard protocols (mean [95% CI]; n questions):"]
    for r in result.protocols:
        where = f"{r.granularity} " if r.granularity else ""
        group = f"{r.group} ({r.category})" if r.category is not None else r.group
        shown = []
        for metric in PROTOCOL_METRICS:
            value, ci = r.value(metric), getattr(r, f"{metric}_ci")
            if value is not None:
                interval = f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else ""
                shown.append(f"{metric} {value:.3f}{interval}")
        lines.append(
            f"  {r.protocol:<11} {r.system:<14} {where}k={r.k:<3} {group:<28} n={r.n:<5} "
            + ("; ".join(shown) or "unscored")
        )
    return "\n".join(lines)
