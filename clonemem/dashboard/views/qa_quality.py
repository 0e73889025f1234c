"""QA quality: the stage IV quality-control funnel, superficial cues against chance, composition, and
the Great Expectations gate with every expectation and its failing samples."""

from __future__ import annotations

import json

import polars as pl
import streamlit as st

from clonemem.dashboard import analysis as A
from clonemem.dashboard import charts
from clonemem.dashboard import queries as Q
from clonemem.dashboard.context import Session, pick_run, run_page
from clonemem.dashboard.links import count
from clonemem.schemas import question_types

TITLE = "QA quality"


def render(session: Session) -> None:
    _funnel(session)
    _cues(session)
    _composition(session)
    _gate(session)


def _funnel(session: Session) -> None:
    db, bench = session.db, session.benchmark
    st.subheader("Quality-control funnel")
    if bench["source"] != "generated":
        st.info(
            f"Benchmark {bench['name']!r} was imported: its questions came through no quality control "
            "here (no plans, sufficiency verdicts or distractor rounds are recorded), so there is no funnel."
        )
        return
    funnel = Q.qc_funnel(db, bench["benchmark_id"])
    if funnel.height == 0:
        st.info("No stage IV results are recorded for this benchmark yet.")
        return
    stages = A.funnel_long(funnel)
    cols = st.columns(stages.height)
    for col, row in zip(cols, stages.iter_rows(named=True)):
        col.metric(row["stage"].replace("_", " "), count(row["items"]))
    infeasible = Q.infeasible_plans(db, bench["benchmark_id"])["infeasible"][0]
    st.caption(
        "planned = items whose plan the writer judged feasible (every item that reached quality control); "
        + (
            f"another {infeasible} candidate(s) were judged infeasible at planning (stage IV records them as "
            "a count only, not per type)."
            if infeasible
            else "no candidate was judged infeasible."
        )
    )
    st.altair_chart(charts.funnel(stages), width="stretch")
    st.markdown("**Outcome of every planned item, by question type and dimension**")
    st.altair_chart(charts.outcomes_by_type(funnel))
    st.markdown("**By question type and dimension**")
    st.dataframe(funnel, hide_index=True)
    rounds = Q.distractor_rounds(db, bench["benchmark_id"])
    if rounds.height:
        st.markdown(
            "**Distractor loop: checks per round** (the validator answering from the options alone, "
            "and from a single evidence item; an item that it solves is redrafted)"
        )
        st.dataframe(
            rounds.with_columns(pass_rate=pl.col("passed") / pl.col("items")), hide_index=True
        )
    with st.expander("Rejected items with their reasons"):
        st.dataframe(Q.rejections(db, bench["benchmark_id"]), hide_index=True)


def _cues(session: Session) -> None:
    st.subheader("Superficial cues against chance")
    items = Q.cue_items(session.db, session.benchmark["benchmark_id"])
    if items.height == 0:
        st.info("No multiple-choice items: nothing to test for superficial cues.")
        return
    cues = A.cue_table(items)
    letters = A.letter_table(items)
    st.caption(
        "Would a test-taker who never read the traces find the correct option by picking the longest "
        "one, or the one sharing most words with the question? Over items whose answer is among A–D "
        "(a tie earns 1/ties); chance is 1/4. Intervals are Wilson 95%."
    )
    left, right = st.columns(2)
    left.altair_chart(
        charts.with_interval(
            cues, value="accuracy", category="cue", title="accuracy", chance=A.CHANCE
        ),
        width="stretch",
    )
    right.altair_chart(
        charts.with_interval(
            letters, value="share", category="letter", title="share of A–D answers", chance=A.CHANCE
        ),
        width="stretch",
    )
    left.dataframe(cues, hide_index=True)
    right.dataframe(letters, hide_index=True)


def _composition(session: Session) -> None:
    db, bid = session.db, session.benchmark["benchmark_id"]
    st.subheader("Composition")
    comp = Q.composition(db, bid)
    media = Q.media_composition(db, bid)
    left, right = st.columns(2)
    if comp.height:
        left.altair_chart(charts.composition(comp), width="stretch")
        left.dataframe(comp, hide_index=True)
        unknown = comp.filter(~pl.col("question_type_known"))
        if unknown.height:
            left.caption(
                f"{int(unknown['questions'].sum())} question(s) have a type outside the "
                f"{len(question_types.names())} declared types "
                f"({', '.join(unknown['question_type'].unique().sort().to_list())}), kept as the source wrote it."
            )
    else:
        left.info("No questions.")
    if media.height:
        right.altair_chart(charts.media(media), width="stretch")
        right.dataframe(media, hide_index=True)
    else:
        right.info("No traces.")


def _gate(session: Session) -> None:
    db, bench = session.db, session.benchmark
    st.subheader("Great Expectations gate")
    runs = Q.gate_runs(db, bench["benchmark_id"])
    if runs.height == 0:
        st.info(
            f"Benchmark {bench['name']!r} has never been gated (gate status {bench['gate_status']}); "
            f"run `clonemem gate {bench['name']}`."
        )
        return
    gate_run_id, _labels = pick_run(runs, "gate_run_id", "status", "Gate run", key="qa_gate_run")
    run = runs.filter(pl.col("gate_run_id") == gate_run_id).row(0, named=True)
    results = Q.gate_results(db, gate_run_id)
    failed = results.filter(~pl.col("success"))
    cols = st.columns(3)
    cols[0].metric("status", run["status"])
    cols[1].metric("expectations", count(results.height))
    cols[2].metric("failed", count(failed.height))
    if run["data_docs_path"]:
        st.caption(f"Data Docs: `{run['data_docs_path']}`")
    st.caption(
        "measured: what a bounded expectation measured (a rate, a cue's accuracy, the largest media-mix "
        "deviation); bound: the interval it must lie in. Other expectations count unexpected rows."
    )
    if bench["source"] == "generated" and results["measured"].is_null().all():
        st.caption(
            "This gate run predates stored measurements: its bounded expectations show no measured value."
        )
    st.dataframe(
        results.drop("failing_sample"),
        hide_index=True,
        column_config={"measured": st.column_config.NumberColumn(format="%.4f")},
    )
    for row in failed.iter_rows(named=True):
        with st.expander(
            f"failed: {row['suite']} / {row['expectation']} ({row['unexpected_count']} unexpected)"
        ):
            st.json(_json(row["failing_sample"]))


def _json(text: str | None) -> object:
    try:
        return json.loads(text) if text else []
    except ValueError:
        return text


if __name__ == "__main__":
    run_page(
        TITLE,
        render,
        about="How the questions were filtered, whether shallow cues give answers away, "
        "and what the gate found.",
    )
