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

TITLE = "History"
HEADLINE = ("recall_flat", "choice_accuracy", "qa_consistency")


def render(session: Session) -> None:
    db, bench = session.db, session.benchmark
    history = Q.metric_history(db, bench["benchmark_id"])
    if history.height == 0:
        st.info(f"Benchmark {bench['name']!r} has not been evaluated yet: "
                f"`clonemem evaluate {bench['name']} --systems bm25,random --k 5,10`.")
        return
    evaluations = history.select("eval_run_id", "started_at").unique(maintain_order=True)
    st.caption(f"{evaluations.height} evaluation(s) of {bench['name']!r}. A re-run that changes nothing (same "
               "content, systems, k, config, provenance and results) is not stored again, so each point is a "
               "distinct evaluation.")
    names = sorted(history["metric"].unique().to_list())
    chosen = st.multiselect("Metrics", names, default=[m for m in HEADLINE if m in names] or names[:1],
                            key="hist_metrics")
    ks = sorted(history["k"].unique().to_list())
    k = st.selectbox("k", ks, key="hist_k")
    changes = A.provenance_changes(Q.eval_identities(db, bench["benchmark_id"], session.columns("eval_runs")))
    for metric in chosen:
        series = history.filter((pl.col("metric") == metric) & (pl.col("k") == k)).drop_nulls("value")
        st.subheader(f"{metric} at k = {k}")
        if series.height == 0:
            st.info(f"No evaluation computed {metric} at k = {k}.")
            continue
        st.altair_chart(charts.history(series, changes, metric), width="stretch")
    st.subheader("What changed between evaluations")
    if changes.height:
        st.dataframe(changes.select("started_at", "eval_run_id", "changes"), hide_index=True)
    else:
        st.caption("No change of code, stage models, answerer, judge, package versions or aggregation between "
                   "these evaluations (as far as their provenance was recorded).")
    st.subheader("Figures")
    st.dataframe(history.filter(pl.col("metric").is_in(chosen) & (pl.col("k") == k))
                 .select("started_at", "eval_run_id", "system", "metric", "n", "value", "ci_low", "ci_high"),
                 hide_index=True)


if __name__ == "__main__":
    run_page(TITLE, render, about="Each system's figures across evaluations over time, with 95% intervals; "
                                  "dashed rules mark where code, models or config changed.")
