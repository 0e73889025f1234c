"""Runs: the warehouse's pipeline and evaluation runs with their Prefect flow-run (and deployment) ids
where the schema has them (flow-run ids link to the Prefect UI, see ``links``), durations, what their
summaries say (cached steps and items, LLM calls) and the LLM calls per run and stage; first, the runs
that did not complete (failed, crashed, interrupted, stopped at the budget) with their error line. A
``running`` row whose process is known to have ended is shown as ``crashed`` (the next run marks it so
in the warehouse; this page only reads)."""

from __future__ import annotations

import polars as pl
import streamlit as st

from clonemem.dashboard import analysis as A
from clonemem.dashboard import charts, links
from clonemem.dashboard import queries as Q
from clonemem.dashboard.context import WarehouseSession, run_page
from clonemem.warehouse.runs import orphaned

TITLE = "Runs"
# Summary fields worth a column of their own where a run's summary has them: generation counts the
# steps it took from the cache (cached_steps), stage IV the items (cached_items).
SUMMARY_FIELDS = (
    "cached_steps",
    "cached_items",
    "steps",
    "llm_calls",
    "landed",
    "unchanged",
    "personas",
    "traces",
    "seconds",
)
# A run of kind 'pipeline' is one `clonemem run`; its stages (generate, qa, gate) and imports are runs of their own.
PIPELINE_KIND = "pipeline"
# what a run that did not complete shows first (the rest of its row is in the table below)
UNFINISHED = ("status", "kind", "benchmark", "started_at", "finished_at", "error", "flow_run_id")
COMPLETED_OR_RUNNING = ("completed", "running")
COUNTS = (
    "llm_calls",
    "failed_calls",
    "llm_tokens",
    "summary.cached_steps",
    "summary.cached_items",
    "summary.steps",
    "summary.llm_calls",
    "summary.landed",
    "summary.unchanged",
    "summary.personas",
    "summary.traces",
)


def render(session: WarehouseSession) -> None:
    db = session.db
    only = session.chosen is not None and st.toggle(
        f"Only benchmark {session.chosen['name']!r}", value=False, key="runs_only"
    )
    name = session.chosen["name"] if only and session.chosen is not None else None
    pipeline = _with_orphans(_only(Q.run_rows(db, "runs", session.columns("runs")), name))
    evaluations = _only(Q.run_rows(db, "eval_runs", session.columns("eval_runs")), name)
    summaries = _summaries(Q.run_summaries(db, session.columns("runs")))
    calls = Q.calls_by_run_stage(db)
    extra = [c for c in pipeline.columns if "deployment" in c or "flow_run" in c]
    whole = pipeline.filter(pl.col("kind") == PIPELINE_KIND).height if pipeline.height else 0
    cols = st.columns(4)
    cols[0].metric("pipeline runs", links.count(whole), help="`clonemem run` (kind 'pipeline')")
    cols[1].metric(
        "stage runs",
        links.count(pipeline.height - whole),
        help="generate, qa, gate and import runs, each recorded on its own (also inside a pipeline run)",
    )
    cols[2].metric("evaluations", links.count(evaluations.height))
    cols[3].metric("LLM calls", links.count(int(calls["calls"].sum()) if calls.height else 0))
    ui = links.prefect_ui()
    st.caption(
        "Prefect ids shown: "
        + (", ".join(extra) if extra else "none recorded in this schema")
        + (
            f"; flow-run ids link to the Prefect UI at {ui}"
            if ui
            else "; set PREFECT_UI_URL (or PREFECT_API_URL) to link flow-run ids to the Prefect UI"
        )
    )

    st.subheader("Runs that did not complete")
    _unfinished(pipeline, ui)
    st.subheader("Pipeline and stage runs")
    if pipeline.height:
        table = pipeline.join(summaries, on="run_id", how="left") if summaries.height else pipeline
        _table(_with_calls(table, calls, "run_id"), ui)
    else:
        st.info(
            "No pipeline runs recorded"
            + (" for this benchmark" if name else "")
            + " (imports and the gate record none of their own)."
        )
    st.subheader("Evaluations")
    if evaluations.height:
        _table(_with_calls(evaluations, calls, "eval_run_id"), ui)
    else:
        st.info("No evaluations recorded" + (" for this benchmark." if name else "."))
    durations = _durations(pipeline, evaluations)
    if durations.height:
        st.altair_chart(charts.run_durations(durations), width="stretch")

    st.subheader("LLM calls per run and stage")
    if calls.height == 0:
        st.info("No LLM calls recorded.")
        return
    labels = _labels(pipeline, evaluations)
    shown = calls.with_columns(
        run=pl.Series(
            [labels.get(r, r or "(no run id)") for r in calls["run_id"].to_list()], dtype=pl.Utf8
        )
    )
    if name:
        shown = shown.filter(pl.col("run_id").is_in(list(labels)))
    st.altair_chart(charts.calls_per_stage(shown), width="stretch")
    st.dataframe(shown.select("run", *[c for c in calls.columns if c != "run_id"]), hide_index=True)


def _with_orphans(frame: pl.DataFrame) -> pl.DataFrame:
    """``running`` rows whose process (``host``, ``pid``, ``process_start``) is known to have ended, as
    ``crashed`` with the error line that says so; the start token itself is not shown."""
    if (
        not {"status", "host", "pid", "process_start", "error"} <= set(frame.columns)
        or frame.height == 0
    ):
        return frame
    running = frame.filter(pl.col("status") == "running").select(
        "run_id", "host", "pid", "process_start"
    )
    dead = orphaned(
        [(r, h, None if p is None else int(p), t) for r, h, p, t in running.iter_rows()]
    )
    if dead:
        gone = pl.col("run_id").is_in(list(dead))
        frame = frame.with_columns(
            status=pl.when(gone).then(pl.lit("crashed")).otherwise(pl.col("status")),
            error=pl.when(gone)
            .then(pl.col("run_id").replace_strict(dead, default=None, return_dtype=pl.Utf8))
            .otherwise(pl.col("error")),
        )
    return frame.drop("process_start")


def _unfinished(runs: pl.DataFrame, ui: str | None) -> None:
    """Failed, crashed, interrupted and budget-stopped runs, newest first, with their error line and a link
    to the Prefect flow run where one is known."""
    if runs.height == 0 or "status" not in runs.columns:
        st.info("No runs recorded.")
        return
    bad = runs.filter(~pl.col("status").is_in(COMPLETED_OR_RUNNING))
    if bad.height == 0:
        st.info("Every recorded run completed or is still running.")
        return
    shown = bad.select([c for c in UNFINISHED if c in bad.columns])
    linked, config = links.link_flow_runs(shown, ["flow_run_id"], ui)
    st.dataframe(
        linked,
        hide_index=True,
        column_config={**config, "error": st.column_config.TextColumn("error", width="large")},
    )


def _table(frame: pl.DataFrame, ui: str | None) -> None:
    """A run table: counts with thousands separators, flow-run ids as links to the Prefect UI."""
    linked, config = links.link_flow_runs(frame, [c for c in frame.columns if "flow_run" in c], ui)
    st.dataframe(
        linked, hide_index=True, column_config={**links.count_columns(linked, COUNTS), **config}
    )


def _only(frame: pl.DataFrame, name: str | None) -> pl.DataFrame:
    if name is None or frame.height == 0:
        return frame
    return frame.filter(pl.col("benchmark") == name)


def _summaries(frame: pl.DataFrame) -> pl.DataFrame:
    """Selected fields of each run's JSON summary as columns (absent fields stay null)."""
    if frame.height == 0:
        return pl.DataFrame()
    rows = []
    for r in frame.iter_rows(named=True):
        fields = A.flatten_summary(r["summary"])
        rows.append(
            {"run_id": r["run_id"], **{f"summary.{k}": fields.get(k) for k in SUMMARY_FIELDS}}
        )
    out = pl.DataFrame(rows, infer_schema_length=None)
    return out.select([c for c in out.columns if c == "run_id" or out[c].null_count() < out.height])


def _with_calls(frame: pl.DataFrame, calls: pl.DataFrame, key: str) -> pl.DataFrame:
    """Add the LLM calls, failed calls and tokens the warehouse recorded under each run (0 for a run that
    made none, e.g. a re-run served from the cache)."""
    if calls.height == 0:
        return frame.with_columns(
            llm_calls=pl.lit(0, pl.Int64),
            failed_calls=pl.lit(0, pl.Int64),
            llm_tokens=pl.lit(0, pl.Int64),
        )
    per_run = calls.group_by("run_id").agg(
        llm_calls=pl.col("calls").sum(),
        failed_calls=pl.col("failed_calls").sum(),
        llm_tokens=pl.col("tokens").sum(),
    )
    return frame.join(per_run, left_on=key, right_on="run_id", how="left").with_columns(
        pl.col("llm_calls", "failed_calls", "llm_tokens").fill_null(0).cast(pl.Int64)
    )


def _durations(pipeline: pl.DataFrame, evaluations: pl.DataFrame) -> pl.DataFrame:
    parts = []
    if pipeline.height:
        parts.append(
            pipeline.select(
                label=_label_expr("kind"), kind=pl.col("kind"), seconds=pl.col("seconds")
            )
        )
    if evaluations.height:
        parts.append(
            evaluations.select(
                label=_label_expr(None), kind=pl.lit("evaluate"), seconds=pl.col("seconds")
            )
        )
    return pl.concat(parts).drop_nulls("seconds") if parts else pl.DataFrame()


def _label_expr(kind: str | None) -> pl.Expr:
    what = pl.col(kind) if kind else pl.lit("evaluate")
    return pl.format(
        "{} {} {}",
        what,
        pl.col("benchmark").fill_null("?"),
        pl.col("started_at").dt.strftime("%m-%d %H:%M:%S"),
    )


def _labels(pipeline: pl.DataFrame, evaluations: pl.DataFrame) -> dict[str, str]:
    labels: dict[str, str] = {}
    if pipeline.height:
        labels.update(
            zip(
                pipeline["run_id"].to_list(),
                pipeline.select(_label_expr("kind")).to_series().to_list(),
            )
        )
    if evaluations.height:
        ids = evaluations["eval_run_id"].to_list()
        labels.update(zip(ids, evaluations.select(_label_expr(None)).to_series().to_list()))
    return labels


if __name__ == "__main__":
    run_page(
        TITLE,
        render,
        needs_benchmark=False,
        about="What ran against this warehouse, how long it took, and which LLM calls each stage made.",
    )
