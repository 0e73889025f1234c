"""History: each system's headline figures on the benchmark across its evaluations over time, with 95%
bootstrap intervals, and a marker wherever the code, models, packages or aggregation changed from one
evaluation to the next (their provenance)."""

from __future__ import annotations

import polars as pl
import streamlit as st

from clonemem.dashboard import analysis as A
from clonemem.dashboard import charts
from clonemem.dashboard import queries as Q
from clonemem.dashboard.context import Session, run_page
from clonemem.evaluation import leaderboard as L

TITLE = "History"
HEADLINE = ("recall_flat", "choice_accuracy", "qa_consistency")


def render(session: Session) -> None:
    db, bench = session.db, session.benchmark
    history = Q.metric_history(db, bench["benchmark_id"])
    if history.height == 0:
        st.info(
            f"Benchmark {bench['name']!r} has not been evaluated yet: "
            f"`clonemem evaluate {bench['name']} --systems bm25,random --k 5,10`."
        )
        return
    labels = A.evaluation_labels(history)
    history = history.join(labels.select("eval_run_id", "evaluation"), on="eval_run_id", how="left")
    order = labels["evaluation"].to_list()
    st.caption(
        f"{labels.height} evaluation(s) of {bench['name']!r}, numbered in the order they were made. A "
        "re-run that changes nothing (same content, systems, k, config, provenance and results) is not "
        "stored again, so each point is a distinct evaluation."
    )
    names = sorted(history["metric"].unique().to_list())
    chosen = st.multiselect(
        "Metrics",
        names,
        default=[m for m in HEADLINE if m in names] or names[:1],
        key="hist_metrics",
    )
    ks = sorted(history["k"].unique().to_list())
    k = st.selectbox("k", ks, key="hist_k")
    # per system against its own previous evaluation, whatever was evaluated in between
    assert db is not None and bench is not None  # a page renders only with both (context.run_page)
    evaluated = L.evaluated(Q.system_evaluations(db, bench["benchmark_id"]))
    changes = L.system_changes(evaluated).join(
        labels.select("eval_run_id", "evaluation"), on="eval_run_id", how="left"
    )
    # how each point was made: its retrieval mode and the questions asked (a quick run's sample)
    how = pl.DataFrame(
        [
            {
                "eval_run_id": e.eval_run_id,
                "system": e.system,
                "mode": e.mode,
                "questions": e.sample,
            }
            for e in evaluated
        ],
        schema={"eval_run_id": pl.Utf8, "system": pl.Utf8, "mode": pl.Utf8, "questions": pl.Utf8},
    )
    history = history.join(how, on=["eval_run_id", "system"], how="left")
    markers = changes.group_by("evaluation", "eval_run_id", maintain_order=True).agg(
        pl.format("{}: {}", "system", "changes").str.join("; ").alias("changes")
    )
    for metric in chosen:
        series = history.filter((pl.col("metric") == metric) & (pl.col("k") == k)).drop_nulls(
            "value"
        )
        st.subheader(f"{metric} at k = {k}")
        if series.height == 0:
            st.info(f"No evaluation computed {metric} at k = {k}.")
            continue
        st.altair_chart(charts.history(series, markers, metric, order), width="stretch")
    st.subheader("What changed between a system's evaluations")
    if changes.height:
        st.caption(
            "Each system against its own previous evaluation of this benchmark: its code hash, a remote "
            "server's URL, name, version and protocol, a results file's hash, the retrieval mode, the "
            "answerer and judge, the aggregation, the questions asked, the benchmark's content, the "
            "project's commit, package versions and the config."
        )
        st.dataframe(
            changes.select("evaluation", "system", "changes", "eval_run_id"), hide_index=True
        )
    else:
        st.caption(
            "No system's provenance (code, remote server identity, models, retrieval mode, aggregation, "
            "questions, packages, config) changed between its evaluations (as far as they were recorded)."
        )
    st.subheader("Figures")
    st.dataframe(
        history.filter(pl.col("metric").is_in(chosen) & (pl.col("k") == k)).select(
            "evaluation",
            "started_at",
            "eval_run_id",
            "system",
            "mode",
            "questions",
            "metric",
            "n",
            "value",
            "ci_low",
            "ci_high",
        ),
        hide_index=True,
    )


if __name__ == "__main__":
    run_page(
        TITLE,
        render,
        about="Each system's figures across evaluations over time, with 95% intervals; "
        "dashed rules mark where a system's provenance changed.",
    )
