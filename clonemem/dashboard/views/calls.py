"""Calls: the LLM calls of the benchmark's runs (or of every run), filtered by run, stage and outcome, each
with what it was about (question, system, k) and, where stored, its prompt and reply."""

from __future__ import annotations

from typing import get_args

import streamlit as st

from clonemem.dashboard import charts, exchanges
from clonemem.dashboard import queries as Q
from clonemem.dashboard.context import Session, run_label, run_page
from clonemem.llm.types import Outcome

TITLE = "Calls"
LIMIT = 500  # rows of the call table (the count says how many match)


def render(session: Session) -> None:
    db, bench = session.db, session.benchmark
    columns = session.columns("llm_calls")
    if "prompt_text" not in columns:
        st.info(
            f"{session.path.name} predates stored calls (migration 0018): any clonemem command that writes "
            "it adds the columns; calls made before have no prompt or reply."
        )
    everywhere = st.toggle(
        "Runs of every benchmark",
        value=False,
        key="calls_all",
        help="also calls of other benchmarks' runs, and calls no benchmark's run owns",
    )
    runs = Q.call_runs(db, None if everywhere else bench["benchmark_id"])
    if runs.height == 0:
        st.info(
            f"No LLM calls recorded for runs of {bench['name']!r}"
            + (
                ""
                if everywhere
                else " (an import makes none; generation, the gate and evaluations with LLM steps do)"
            )
            + "."
        )
        return
    labels = {
        r["run_id"]: run_label(
            r["first_call"],
            r["run_id"] or "(no run id)",
            f"{r['benchmark'] or 'no benchmark'}, {r['calls']} calls"
            + (f", {r['failed_calls']} failed" if r["failed_calls"] else ""),
        )
        for r in runs.iter_rows(named=True)
    }
    run_ids = st.multiselect(
        "Runs",
        list(labels),
        default=list(labels)[:1],
        format_func=labels.__getitem__,
        key="calls_runs",
    )
    if not run_ids:
        st.info("Pick one run or more.")
        return
    overview = Q.call_stage_outcomes(db, run_ids)
    st.altair_chart(charts.calls_by_stage(overview), width="stretch")
    left, right = st.columns(2)
    stages = left.multiselect(
        "Stages",
        sorted(overview["stage"].unique().to_list()),
        key="calls_stages",
        placeholder="every stage",
    )
    known = list(get_args(Outcome))  # every outcome, also those these runs never had
    outcomes = right.multiselect(
        "Outcomes",
        known + sorted(set(overview["outcome"]) - set(known)),
        key="calls_outcomes",
        placeholder="every outcome",
    )
    found = Q.calls(db, run_ids, stages or None, outcomes or None, columns, limit=LIMIT)
    matching = int(found["matching"][0]) if found.height else 0
    st.caption(
        f"{matching} call(s) match"
        + (f"; the newest {LIMIT} are listed" if matching > LIMIT else "")
    )
    if found.height == 0:
        return
    st.dataframe(found.drop("matching"), hide_index=True)
    rows = {r["call_id"]: r for r in found.iter_rows(named=True)}
    call_id = st.selectbox(
        "Call", list(rows), key="calls_call", format_func=lambda c: _label(rows[c])
    )
    call = Q.call(db, call_id, columns).row(0, named=True)
    st.subheader(f"{call['stage']} · {call['provider']}/{call['model']} · {call['outcome']}")
    st.caption(
        f"call {call['call_id']} of run {call['run_id']}, {call['started_at']:%Y-%m-%d %H:%M:%S}, "
        f"{call['attempts']} attempt(s)" + (f"; about {call['item']}" if call["item"] else "")
    )
    exchanges.show(call["prompt_text"], call["response_text"], call["error"])


def _label(row: dict) -> str:
    about = "".join(
        f" · {v}"
        for v in (
            row["system"],
            None if row["k"] is None else f"k={row['k']}",
            row["question_id"] and row["question_id"][:12],
        )
        if v
    )
    return f"{row['started_at']:%H:%M:%S} · {row['stage']} · {row['outcome']}{about} · {row['call_id'][:8]}"


if __name__ == "__main__":
    run_page(
        TITLE,
        render,
        about="The LLM calls of a run: filter by stage and outcome, read a call's prompt "
        "and reply (stored for offline calls by default: [logging] store_calls).",
    )
