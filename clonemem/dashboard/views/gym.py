"""Gym: on-policy evaluation runs (`clonemem gym`). Accuracy and normalized memory score over the
evaluation positions per system with the random and upper bounds, the on- vs off-policy ranks, the
misses by cause, and a conversation viewer: a persona's states in a period, the sessions the simulated
user had with a system's assistant, and the questions asked after it."""

from __future__ import annotations

import json

import polars as pl
import streamlit as st

from clonemem.dashboard import charts
from clonemem.dashboard import queries as Q
from clonemem.dashboard.context import WarehouseSession, pick_run, run_page

TITLE = "Gym"


def render(session: WarehouseSession) -> None:
    db = session.db
    assert db is not None
    if not session.columns("gym_runs"):
        st.info(
            "This warehouse predates the gym: run any writing command (e.g. `clonemem gym`) to bring it up to date."
        )
        return
    runs = Q.gym_runs(db)
    if runs.height == 0:
        st.info(
            "No gym runs yet: `clonemem gym --config configs/gym-base.toml --systems bm25,no_memory`."
        )
        return
    run_id, _ = pick_run(runs, "gym_run_id", "detail", "Gym run", "gym_run")
    run = runs.filter(pl.col("gym_run_id") == run_id).row(0, named=True)
    st.caption(
        f"N_p = {run['periods']} periods, N_s = {run['states_per_question']} states per question, "
        f"N_i = {run['turns_per_exposure']} turns per exposure; systems {', '.join(json.loads(run['systems']))}; "
        f"openings exposing their states {run['exposure_rate']:.1%}; random bound {run['random_bound']:.3f}, "
        f"upper bound (true states) {run['upper_bound']:.3f}; off-policy history: {run['reference']}'s transcript."
    )
    _scores(session, run_id)
    _conversation(session, run_id)


def _scores(session: WarehouseSession, run_id: str) -> None:
    db = session.db
    assert db is not None
    positions = Q.gym_position_metrics(db, run_id)
    bounds = positions.filter(pl.col("system") == "(bounds)").with_columns(
        pl.format("{} bound", pl.col("metric")).alias("system")
    )
    systems = positions.filter(pl.col("system") != "(bounds)")
    left, right = st.columns(2)
    left.subheader("Accuracy by position")
    left.altair_chart(
        charts.gym_positions(
            pl.concat([systems.filter(pl.col("metric") == "accuracy"), bounds]), "accuracy"
        ),
        width="stretch",
    )
    right.subheader("Memory score by position")
    right.altair_chart(
        charts.gym_positions(
            systems.filter(pl.col("metric") == "memory_score"), "(S − S_random) / (S_UB − S_random)"
        ),
        width="stretch",
    )
    st.subheader("Overall, and on- vs off-policy")
    st.dataframe(Q.gym_overall(db, run_id), hide_index=True)


def _conversation(session: WarehouseSession, run_id: str) -> None:
    db = session.db
    assert db is not None
    st.subheader("Conversation viewer")
    index = Q.gym_conversation_index(db, run_id)
    if index.height == 0:
        st.info("This run kept no turns.")
        return
    a, b, c = st.columns(3)
    system = a.selectbox("System", sorted(index["system"].unique().to_list()), key="gym_system")
    people = (
        index.filter(pl.col("system") == system)
        .select("persona_id", "person_key")
        .unique()
        .sort("person_key")
    )
    keys = dict(zip(people["persona_id"].to_list(), people["person_key"].to_list(), strict=True))
    persona = b.selectbox("Persona", list(keys), format_func=keys.__getitem__, key="gym_persona")
    periods = sorted(
        index.filter((pl.col("system") == system) & (pl.col("persona_id") == persona))[
            "period"
        ].to_list()
    )
    period = c.selectbox("Period", periods, key="gym_period")
    states = Q.gym_states(db, run_id, persona, period)
    if states.height:
        first = states.row(0, named=True)
        st.caption(f"{first['period_date']}: {first['event_title']}")
        st.dataframe(states.select("label", "value", "changed"), hide_index=True)
    for turn in Q.gym_turns(db, run_id, system, persona, period).iter_rows(named=True):
        with st.chat_message(turn["speaker"]):
            opening = " (opening)" if turn["speaker"] == "user" and turn["turn"] == 0 else ""
            st.markdown(
                f"**session {turn['session'] + 1}{opening}** · {turn['said_at']:%H:%M}\n\n{turn['text']}"
            )
    st.markdown(f"**Questions asked after period {period}**")
    st.dataframe(Q.gym_answers(db, run_id, system, persona, period), hide_index=True)


if __name__ == "__main__":
    run_page(
        TITLE,
        render,
        needs_benchmark=False,
        about="On-policy evaluation: accuracy and memory score over the evaluation positions per system, "
        "the on- vs off-policy ranks, and the conversations the simulated user had.",
    )
