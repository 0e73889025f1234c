"""Generation: per persona, the planned life on a time axis (arcs, phases, major events), traces per
medium per month, and a trace browser (filters, full text, the questions that cite a trace)."""

from __future__ import annotations

import datetime as dt

import streamlit as st

from clonemem.dashboard import charts
from clonemem.dashboard import queries as Q
from clonemem.dashboard.context import Session, generation_note, run_page
from clonemem.dashboard.links import count

TITLE = "Generation"
BROWSER_ROWS = 200


def render(session: Session) -> None:
    db, bench = session.db, session.benchmark
    people = Q.personas(db, bench["benchmark_id"])
    if people.height == 0:
        st.info(f"Benchmark {bench['name']!r} has no personas.")
        return
    labels = {
        r["persona_id"]: f"{r['person_name']} ({r['person_key']})"
        for r in people.iter_rows(named=True)
    }
    persona_id = st.selectbox(
        "Persona", list(labels), format_func=labels.__getitem__, key="gen_persona"
    )
    persona = people.filter(people["persona_id"] == persona_id).row(0, named=True)
    counts = Q.generation_counts(db, persona_id).row(0, named=True)
    cols = st.columns(len(counts))
    for col, (name, value) in zip(cols, counts.items()):
        col.metric(name.replace("_", " "), count(value))
    span = (
        f"{persona['timeline_start']:%Y-%m-%d} – {persona['timeline_end']:%Y-%m-%d}"
        if persona["timeline_start"] and persona["timeline_end"]
        else "no timeline recorded"
    )
    st.caption(
        f"language {persona['language'] or 'unknown'} · timeline {span}"
        + (f" · from {persona['source_file']}" if persona["source_file"] else "")
    )

    st.subheader("Timeline")
    if generation_note(session, "life arcs, phases or major events") and counts["arcs"]:
        arcs, phases, events = (
            Q.arc_segments(db, persona_id),
            Q.phases(db, persona_id),
            Q.major_events(db, persona_id),
        )
        st.altair_chart(charts.timeline(arcs, phases, events), width="stretch")
        with st.expander(f"{phases.height} phases with their end-of-phase snapshot"):
            st.dataframe(phases, hide_index=True)
        with st.expander(f"{events.height} major events"):
            st.dataframe(events, hide_index=True)

    st.subheader("Traces per medium per month")
    monthly = Q.traces_per_month(db, persona_id)
    if monthly.height:
        st.altair_chart(charts.traces_per_month(monthly), width="stretch")
    else:
        st.info("This persona has no traces.")
        return
    _browser(session, persona_id)


def _browser(session: Session, persona_id: str) -> None:
    db = session.db
    st.subheader("Trace browser")
    media = Q.trace_media(db, persona_id)["medium"].to_list()
    bounds = Q.trace_date_range(db, persona_id).row(0, named=True)
    first, last = bounds["first"].date(), bounds["last"].date()
    left, right = st.columns([2, 1])
    chosen = left.multiselect("Media", media, default=media, key=f"gen_media_{persona_id}")
    picked = right.date_input(
        "Dates", (first, last), min_value=first, max_value=last, key=f"gen_dates_{persona_id}"
    )
    start, end = _range(picked, first, last)
    found = Q.traces(db, persona_id, chosen, start, end, BROWSER_ROWS)
    total = int(found["matching"][0]) if found.height else 0
    st.caption(
        f"{total} traces match"
        + (f"; the newest {BROWSER_ROWS} are listed" if total > BROWSER_ROWS else "")
    )
    if found.height == 0:
        return
    st.dataframe(
        found.drop("matching", "trace_id").with_columns(found["content"].str.slice(0, 140)),
        hide_index=True,
        height=280,
    )
    ids = found["trace_id"].to_list()
    names = {
        r["trace_id"]: f"{r['event_date']:%Y-%m-%d %H:%M} · {r['medium']} · {r['external_id']}"
        for r in found.iter_rows(named=True)
    }
    trace_id = st.selectbox(
        "Read a trace", ids, format_func=names.__getitem__, key=f"gen_trace_{persona_id}"
    )
    row = Q.trace(db, trace_id).row(0, named=True)
    meta = [
        f"medium {row['medium']}",
        f"{row['event_date']:%Y-%m-%d %H:%M}",
        f"id {row['external_id']}",
    ]
    if row["is_noise"]:
        meta.append("noise (carries no evidence)")
    if row["detailed_event"]:
        meta.append(f"detailed event: {row['detailed_event']}")
    if row["intent"]:
        meta.append(f"intent: {row['intent']}")
    if row["audience"]:
        meta.append(f"audience: {row['audience']}")
    st.caption(" · ".join(meta))
    st.text(row["content"])
    cites = Q.trace_citations(db, trace_id)
    if cites.height:
        st.markdown(f"**Cited by {cites['question_id'].n_unique()} question(s)**")
        st.dataframe(cites.drop("question_id"), hide_index=True)
    else:
        st.caption("No question cites this trace.")


def _range(picked: object, first: dt.date, last: dt.date) -> tuple[dt.date, dt.date]:
    """The date input gives one date while a range is being picked, a pair once it is complete."""
    if isinstance(picked, (tuple, list)):
        if len(picked) == 2:
            return picked[0], picked[1]
        if len(picked) == 1:
            return picked[0], picked[0]
        return first, last
    if isinstance(picked, dt.date):
        return picked, picked
    return first, last


if __name__ == "__main__":
    run_page(
        TITLE, render, about="What generation planned and wrote for each persona, on a time axis."
    )
