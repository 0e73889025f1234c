"""What a run leaves in Prefect: one summary line per stage in the flow log, and artifacts (the gate's
expectations, the quality-control funnel, the leaderboard with 95% intervals, links to the dashboard).

Called from flows; outside a flow run (a plain function call) the artifacts are skipped, the lines go
to the module logger.
"""

from __future__ import annotations

import logging
from contextlib import AbstractContextManager
from typing import Any

from clonemem import progress, settings
from clonemem.evaluation import leaderboard as L
from clonemem.evaluation.report import leaderboard_markdown, provenance_markdown
from clonemem.pages import PAGES
from clonemem.schemas.results import EvaluationResult, GateResult, PipelineResult, QAResult
from clonemem.warehouse.leaderboard import wh_query


def _in_flow_run() -> bool:
    from prefect.context import FlowRunContext

    return FlowRunContext.get() is not None


def log(line: str) -> None:
    """One summary line in the flow run's log (Prefect's run logger), or the module logger outside a run."""
    if _in_flow_run():
        from prefect import get_run_logger

        get_run_logger().info(line)
    else:
        logging.getLogger("clonemem").info(line)


def heartbeat(name: str) -> AbstractContextManager[None]:
    """While the block runs, a line in the flow log every ``CLONEMEM_HEARTBEAT_SECONDS`` (default 30) saying
    what is under way (see :func:`clonemem.progress.heartbeat`)."""
    return progress.heartbeat(log, settings.current().heartbeat_s, name)


def _key(text: str) -> str:
    """Artifact keys: lowercase letters, digits and dashes."""
    return (
        "".join(ch if ch.isalnum() else "-" for ch in text.lower()).strip("-")[:100] or "clonemem"
    )


def dashboard_url(page: str, **query: str) -> str:
    """The dashboard's page ``page`` (its title in clonemem.pages.PAGES) with query parameters."""
    base = settings.current().dashboard_url
    path = next(url for title, _, url in PAGES if title == page)
    args = "&".join(f"{k}={v}" for k, v in query.items())
    return f"{base}/{path}" + (f"?{args}" if args else "")


def publish_gate(result: GateResult) -> None:
    log(
        f"gate {result.status} for {result.name!r}: {len(result.outcomes) - len(result.failed)}/{len(result.outcomes)} "
        f"expectations met"
        + (f"; unmet: {'; '.join(result.describe_failures())}" if result.failed else "")
    )
    if not _in_flow_run():
        return
    from prefect.artifacts import create_table_artifact

    create_table_artifact(
        key=_key(f"gate-{result.name}"),
        table=[
            {
                "suite": o.suite,
                "expectation": o.expectation,
                "success": o.success,
                "unexpected": o.unexpected_count,
                "failing sample": str(o.failing_sample[:3])[:500],
            }
            for o in result.outcomes
        ],
        description=f"Great Expectations gate of benchmark {result.name!r}: **{result.status}**",
    )


def publish_qa(result: QAResult, name: str) -> None:
    log(result.summary())
    if not _in_flow_run():
        return
    from prefect.artifacts import create_table_artifact

    create_table_artifact(
        key=_key(f"qc-funnel-{name}"),
        table=[r.model_dump() for r in result.funnel],
        description=f"Quality-control funnel of benchmark {name!r} per question type and dimension: candidates → "
        f"written → rejected (format, evidence sufficiency, distractor loop) → accepted. Superficial cues: "
        f"longest option {result.cues.longest_option_accuracy}, question-word overlap "
        f"{result.cues.overlap_option_accuracy} (chance 0.25).",
    )


def publish_leaderboard(result: EvaluationResult, warehouse_path: str | None = None) -> None:
    """The evaluation in the log, and as a Prefect artifact the benchmark's leaderboard across its
    evaluations (this one's systems among the latest of every system; ``warehouse_path`` to read it)
    followed by this evaluation's own table and provenance."""
    log(result.summary())
    for r in result.results:
        log(
            f"  {r.system} k={r.k}: recall_flat {_fmt(r.recall_flat)}, choice {_fmt(r.choice_accuracy)}, "
            f"qa_consistency {_fmt(r.qa_consistency)}"
        )
    if not _in_flow_run():
        return
    from prefect.artifacts import create_markdown_artifact

    create_markdown_artifact(
        key=_key(f"leaderboard-{result.benchmark}"),
        markdown=leaderboard_artifact(result, warehouse_path),
        description=f"Leaderboard of {result.benchmark!r} (after evaluation run {result.eval_run_id})",
    )


def leaderboard_artifact(result: EvaluationResult, warehouse_path: str | None) -> str:
    """The leaderboard artifact's Markdown: the benchmark's board across evaluations (when the warehouse
    is given), then this evaluation's table with its models, intervals and provenance."""
    link = dashboard_url("Leaderboard", benchmark=result.benchmark_id)
    board = ""
    if warehouse_path is not None:
        from clonemem.warehouse import Warehouse

        with Warehouse.open_reader(warehouse_path) as wh:
            board = L.markdown(
                L.read_board(wh_query(wh), result.benchmark_id, result.benchmark), link=link
            )
    prov = result.provenance
    models = (
        "Live models"
        if not result.offline
        else (
            L.offline_label(L.is_offline_ref(prov.answerer), L.is_offline_ref(prov.judge))
            or "offline"
        ).capitalize()
        if prov is not None
        else "Offline answerer or judge"
    )
    return (
        f"# Leaderboard: {result.benchmark}\n\n"
        + (f"{board}\n\n## This evaluation: `{result.eval_run_id}`\n\n" if board else "")
        + f"{models}; 95% bootstrap intervals.\n\n{leaderboard_markdown(result)}\n\n"
        + (f"## Provenance\n\n{provenance_markdown(prov)}\n\n" if prov else "")
        + f"[Open in the dashboard]({link})\n"
    )


def publish_pipeline(result: PipelineResult, flow_run_id: str | None) -> None:
    log(
        f"pipeline {result.name!r} done in {result.seconds:.1f} s: gate {result.gate_status}"
        + (f", {len(result.evaluation.results)} leaderboard rows" if result.evaluation else "")
    )
    if not _in_flow_run():
        return
    from prefect.artifacts import create_markdown_artifact

    links = [
        f"- [Benchmark]({dashboard_url('Benchmarks', benchmark=result.benchmark_id)})",
        f"- [QA quality]({dashboard_url('QA quality', benchmark=result.benchmark_id)})",
        f"- [Leaderboard]({dashboard_url('Leaderboard', benchmark=result.benchmark_id)})",
    ]
    if flow_run_id:
        links.append(
            f"- [Runs]({dashboard_url('Runs', benchmark=result.benchmark_id)}) (this run: `{flow_run_id}`)"
        )
    create_markdown_artifact(
        key=_key(f"pipeline-{result.name}"),
        markdown=f"# Pipeline run: {result.name}\n\n"
        f"- {result.generation.summary()}\n- {result.qa.summary()}\n- gate: **{result.gate_status}**\n"
        + (f"- {result.evaluation.summary()}\n" if result.evaluation else "")
        + (f"- exported to `{result.export.folder}`\n" if result.export else "")
        + "\nDashboard (`clonemem dashboard`):\n\n"
        + "\n".join(links)
        + "\n",
        description=f"Pipeline summary of {result.name!r}",
    )


def _fmt(value: Any) -> str:
    return "-" if value is None else f"{value:.3f}"
