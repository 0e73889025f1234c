"""Benchmarks: every benchmark in the warehouse (source, gate, counts, created, config hash) and LLM spend."""

from __future__ import annotations

import json

import streamlit as st

from clonemem.dashboard import charts
from clonemem.dashboard import queries as Q
from clonemem.dashboard.context import WarehouseSession, run_page
from clonemem.dashboard.links import count, count_columns

TITLE = "Benchmarks"
COUNTS = (
    "personas",
    "traces",
    "questions",
    "calls",
    "failed_calls",
    "input_tokens",
    "output_tokens",
    "unpriced_calls",
)


def render(session: WarehouseSession) -> None:
    catalog = session.catalog
    if catalog.height == 0:
        st.info(
            f"No benchmarks in {session.path} yet: create one with `clonemem demo`, "
            "`clonemem import-release FILE --name NAME` or `clonemem import-locomo PATH --name NAME`."
        )
        return
    st.subheader("All benchmarks")
    st.dataframe(
        catalog.drop("benchmark_id"),
        hide_index=True,
        column_config={
            "created": st.column_config.DatetimeColumn(format="YYYY-MM-DD HH:mm"),
            **count_columns(catalog, COUNTS),
        },
    )
    st.subheader("LLM spend per benchmark")
    by_benchmark = Q.spend_by_benchmark(session.db)
    st.dataframe(by_benchmark, hide_index=True, column_config=count_columns(by_benchmark, COUNTS))
    _selected(session)


def _selected(session: WarehouseSession) -> None:
    bench = session.chosen
    if bench is None:
        if session.benchmark_problem:
            st.error(session.benchmark_problem)
        return
    db = session.db
    st.header(f"{bench['name']}")
    cols = st.columns(4)
    cols[0].metric("personas", count(bench["personas"]))
    cols[1].metric("traces", count(bench["traces"]))
    cols[2].metric("questions", count(bench["questions"]))
    cols[3].metric("gate", bench["gate_status"])
    offline = "offline provider" if bench["is_offline"] else "live models or imported content"
    created = bench["created"].strftime("%Y-%m-%d %H:%M") if bench["created"] else "no run recorded"
    st.markdown(
        f"**{bench['source']}** · config hash `{bench['config_hash'] or 'none'}` · created {created} · "
        f"language {bench['language'] or 'mixed'} · {offline} · status {bench['status']}"
    )
    st.caption(f"id `{bench['benchmark_id']}`")
    spend = Q.spend_for(db, bench["benchmark_id"])
    st.subheader("LLM spend by role, provider and model")
    if spend.height == 0:
        st.info(
            "No LLM calls are recorded for this benchmark's runs"
            + (" (an import makes none)." if bench["source"] == "imported" else ".")
        )
    else:
        totals = st.columns(4)
        totals[0].metric("calls", count(spend["calls"].sum()))
        totals[1].metric("input tokens", count(spend["input_tokens"].sum()))
        totals[2].metric("output tokens", count(spend["output_tokens"].sum()))
        totals[3].metric("estimated cost (USD)", f"{spend['cost_usd'].sum():.4f}")
        st.altair_chart(charts.spend(spend), width="stretch")
        st.dataframe(
            spend,
            hide_index=True,
            column_config={
                "cost_usd": st.column_config.NumberColumn(format="%.4f"),
                **count_columns(spend, COUNTS),
            },
        )
    loose = Q.unattributed_spend(db)
    if loose.height:
        with st.expander(
            f"{int(loose['calls'].sum())} LLM calls in this warehouse name no benchmark's run"
        ):
            st.caption(
                "Calls recorded without a run id (stage IV's QA calls in this version), or whose run "
                "names no benchmark; they are counted here, not in any benchmark's spend."
            )
            st.dataframe(loose, hide_index=True)
    config = Q.benchmark_config(db, bench["benchmark_id"])
    text = config["config_json"][0] if config.height else None
    with st.expander("Stored configuration" if text else "No stored configuration"):
        if text:
            st.json(json.loads(text))


if __name__ == "__main__":
    run_page(
        TITLE,
        render,
        needs_benchmark=False,
        about="Every benchmark in the warehouse, its gate status and counts, and what its LLM calls cost.",
    )
