"""Altair (Vega-Lite) chart builders: each takes query results (polars frames) and returns a chart.
They only encode; every figure comes from the frame passed in."""

from __future__ import annotations

import altair as alt
import polars as pl

DIMENSION_COLORS = alt.Scale(
    domain=["experience", "emotion", "opinion"], range=["#4c78a8", "#e45756", "#54a24b"]
)


def spend(frame: pl.DataFrame) -> alt.Chart:
    """Tokens per role, split by provider/model, with calls and estimated cost in the tooltip."""
    data = frame.with_columns(
        tokens=pl.col("input_tokens") + pl.col("output_tokens"),
        model_ref=pl.format("{}/{}", pl.col("provider"), pl.col("model")),
    )
    return (
        alt.Chart(data)
        .mark_bar()
        .encode(
            x=alt.X("sum(tokens):Q", title="tokens (input + output)"),
            y=alt.Y("role:N", sort="-x", title=None),
            color=alt.Color("model_ref:N", title="provider/model"),
            tooltip=[
                "role:N",
                "model_ref:N",
                "calls:Q",
                "input_tokens:Q",
                "output_tokens:Q",
                alt.Tooltip("cost_usd:Q", format=".4f"),
            ],
        )
        .properties(height=alt.Step(30))
    )


# what altair's layer(...).properties(...) is typed as returning
Layered = alt.LayerChart | alt.FacetChart


def timeline(arcs: pl.DataFrame, phases: pl.DataFrame, events: pl.DataFrame) -> alt.LayerChart:
    """One persona's plan on a time axis: each arc's anchor states between major events, the phases
    (coloured by the stress of the snapshot they end on) and the major events as rules."""
    arc_rows = arcs.with_columns(
        lane=pl.format("arc {}: {}", pl.col("arc_seq") + 1, pl.col("arc")), label=pl.col("state")
    )
    phase_rows = phases.with_columns(lane=pl.lit("phases"))
    lanes = arc_rows["lane"].unique(maintain_order=True).to_list() + ["phases"]
    y = alt.Y("lane:N", title=None, sort=lanes, axis=alt.Axis(labelLimit=320))
    arc_layer = (
        alt.Chart(arc_rows)
        .mark_bar(height=18, cornerRadius=3, stroke="white")
        .encode(
            x=alt.X("start:T", title=None),
            x2="end:T",
            y=y,
            color=alt.Color("dimension:N", scale=DIMENSION_COLORS, title="dimension"),
            opacity=alt.Opacity("anchor_idx:O", legend=None, scale=alt.Scale(range=[0.45, 1.0])),
            tooltip=[
                "arc:N",
                "dimension:N",
                "major_event:N",
                "anchor_idx:O",
                "state:N",
                alt.Tooltip("start:T", format="%Y-%m-%d"),
                alt.Tooltip("end:T", format="%Y-%m-%d"),
            ],
        )
    )
    phase_layer = (
        alt.Chart(phase_rows)
        .mark_bar(height=18, stroke="white")
        .encode(
            x="start:T",
            x2="end:T",
            y=y,
            color=alt.Color(
                "stress:Q", scale=alt.Scale(scheme="orangered"), title="stress after phase"
            ),
            tooltip=[
                "major_event:N",
                "phase:N",
                "dominant_emotion:N",
                "energy:Q",
                "stress:Q",
                "attentional_focus:N",
                "detailed_events:Q",
                alt.Tooltip("start:T", format="%Y-%m-%d"),
                alt.Tooltip("end:T", format="%Y-%m-%d"),
            ],
        )
    )
    event_layer = (
        alt.Chart(events)
        .mark_rule(strokeDash=[4, 3], color="#333")
        .encode(
            x="event_date:T",
            tooltip=[alt.Tooltip("event_date:T", format="%Y-%m-%d"), "title:N", "aligned_arcs:Q"],
        )
    )
    return (
        alt.layer(arc_layer, phase_layer, event_layer)
        .resolve_scale(color="independent")
        .properties(height=40 * len(lanes) + 40)
    )


def traces_per_month(frame: pl.DataFrame) -> alt.Chart:
    return (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            x=alt.X("yearmonth(month):T", title="month"),
            y=alt.Y("sum(traces):Q", title="traces"),
            color=alt.Color("medium:N"),
            tooltip=["yearmonth(month):T", "medium:N", "traces:Q"],
        )
        .properties(height=260)
    )


def funnel(frame: pl.DataFrame) -> alt.Chart:
    """Items at each QC stage (``analysis.funnel_long``)."""
    order = frame.sort("order")["stage"].to_list()
    return (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            x=alt.X("items:Q"),
            y=alt.Y("stage:N", sort=order, title=None, axis=alt.Axis(labelLimit=200)),
            color=alt.Color(
                "stage:N", sort=order, legend=None, scale=alt.Scale(scheme="tableau10")
            ),
            tooltip=["stage:N", "items:Q"],
        )
        .properties(height=alt.Step(30))
    )


def outcomes_by_type(funnel_frame: pl.DataFrame) -> alt.Chart:
    """Outcome of every planned item, per question type, stacked; one panel per dimension."""
    long = funnel_frame.unpivot(
        index=["question_type", "dimension"],
        on=["accepted", "rejected_format", "rejected_sufficiency", "rejected_distractors"],
        variable_name="outcome",
        value_name="items",
    )
    return (
        alt.Chart(long)
        .mark_bar()
        .encode(
            x=alt.X("items:Q"),
            y=alt.Y("question_type:N", title=None),
            color=alt.Color(
                "outcome:N",
                sort=[
                    "accepted",
                    "rejected_format",
                    "rejected_sufficiency",
                    "rejected_distractors",
                ],
            ),
            column=alt.Column("dimension:N", title=None),
            tooltip=["question_type:N", "dimension:N", "outcome:N", "items:Q"],
        )
        .properties(width=230, height=alt.Step(22))
    )


def with_interval(
    frame: pl.DataFrame, *, value: str, category: str, title: str, chance: float | None = None
) -> Layered:
    """A point per category with its 95% interval as an error bar, and an optional chance line."""
    base = alt.Chart(frame).encode(
        y=alt.Y(f"{category}:N", title=None, axis=alt.Axis(labelLimit=220))
    )
    layers: list[alt.Chart] = [
        base.mark_errorbar(ticks=True).encode(
            x=alt.X("ci_low:Q", title=title, scale=alt.Scale(domain=[0, 1])), x2="ci_high:Q"
        ),
        base.mark_point(filled=True, size=80).encode(
            x=f"{value}:Q",
            tooltip=[
                f"{category}:N",
                alt.Tooltip(f"{value}:Q", format=".3f"),
                alt.Tooltip("ci_low:Q", format=".3f"),
                alt.Tooltip("ci_high:Q", format=".3f"),
            ],
        ),
    ]
    if chance is not None:
        layers.append(
            alt.Chart(pl.DataFrame({"chance": [chance]}))
            .mark_rule(color="red", strokeDash=[5, 3])
            .encode(x="chance:Q")
        )
    return alt.layer(*layers).properties(height=alt.Step(36))


def composition(frame: pl.DataFrame) -> Layered:
    """Questions per type × dimension as a heat map with counts."""
    base = alt.Chart(frame).encode(
        x=alt.X("dimension:N", title=None), y=alt.Y("question_type:N", title=None)
    )
    return alt.layer(
        base.mark_rect().encode(
            color=alt.Color("questions:Q", scale=alt.Scale(scheme="blues")),
            tooltip=["question_type:N", "dimension:N", "questions:Q", "multiple_choice:Q"],
        ),
        base.mark_text().encode(text="questions:Q"),
    ).properties(height=260)


def media(frame: pl.DataFrame) -> alt.Chart:
    long = frame.unpivot(
        index=["medium"], on=["traces", "cited_as_evidence"], variable_name="count", value_name="n"
    )
    return (
        alt.Chart(long)
        .mark_bar()
        .encode(
            x=alt.X("n:Q", title="traces"),
            y=alt.Y("medium:N", sort="-x", title=None),
            color="count:N",
            yOffset="count:N",
            tooltip=["medium:N", "count:N", "n:Q"],
        )
        .properties(height=alt.Step(30))
    )


def leaderboard(frame: pl.DataFrame, metric: str) -> alt.FacetChart:
    """Systems on one metric, one panel per k, each value with its 95% bootstrap interval."""
    order = (
        frame.group_by("system")
        .agg(pl.col("value").mean())
        .sort("value", descending=True, nulls_last=True)["system"]
        .to_list()
    )
    base = alt.Chart().encode(y=alt.Y("system:N", sort=order, title=None))
    layer = alt.layer(
        base.mark_errorbar(ticks=True).encode(x=alt.X("ci_low:Q", title=metric), x2="ci_high:Q"),
        base.mark_point(filled=True, size=70).encode(
            x="value:Q",
            color=alt.Color("system:N", legend=None),
            tooltip=[
                "system:N",
                "k:O",
                "n:Q",
                alt.Tooltip("value:Q", format=".3f"),
                alt.Tooltip("ci_low:Q", format=".3f"),
                alt.Tooltip("ci_high:Q", format=".3f"),
            ],
        ),
        data=frame,
    )
    return layer.properties(width=260, height=alt.Step(24)).facet(
        column=alt.Column("k:O", title="k")
    )


def privacy_tradeoff(frame: pl.DataFrame) -> alt.FacetChart:
    """Privacy violation (lower is better) against completeness, one point per system with both 95%
    intervals, one panel per k: LifeSide's view of disclosure against task fulfilment."""
    base = alt.Chart().encode(color=alt.Color("system:N"))
    layer = alt.layer(
        base.mark_errorbar().encode(
            x=alt.X("completeness_low:Q", title="completeness", scale=alt.Scale(domain=[0, 1])),
            x2="completeness_high:Q",
            y="violation:Q",
        ),
        base.mark_errorbar().encode(
            y=alt.Y(
                "violation_low:Q",
                title="violation (lower is better)",
                scale=alt.Scale(domain=[0, 1]),
            ),
            y2="violation_high:Q",
            x="completeness:Q",
        ),
        base.mark_point(filled=True, size=80).encode(
            x="completeness:Q",
            y="violation:Q",
            tooltip=[
                "system:N",
                "k:O",
                "tasks:Q",
                alt.Tooltip("violation:Q", format=".3f"),
                alt.Tooltip("completeness:Q", format=".3f"),
            ],
        ),
        data=frame,
    )
    return layer.properties(width=300, height=300).facet(column=alt.Column("k:O", title="k"))


def by_group(frame: pl.DataFrame, metric: str, group: str) -> Layered:
    """One metric per group (question type or dimension) and system, with 95% intervals."""
    base = alt.Chart(frame).encode(
        y=alt.Y("group_value:N", title=group), yOffset="system:N", color=alt.Color("system:N")
    )
    return alt.layer(
        base.mark_errorbar().encode(x=alt.X("ci_low:Q", title=metric), x2="ci_high:Q"),
        base.mark_point(filled=True).encode(
            x="value:Q",
            tooltip=[
                "group_value:N",
                "system:N",
                "n:Q",
                alt.Tooltip("value:Q", format=".3f"),
                alt.Tooltip("ci_low:Q", format=".3f"),
                alt.Tooltip("ci_high:Q", format=".3f"),
            ],
        ),
    ).properties(height=max(200, 14 * frame.height))


def compare_runs(frame: pl.DataFrame, metric: str) -> Layered:
    """Two evaluation runs side by side: one point per (system, run) with its interval."""
    base = alt.Chart(frame).encode(
        y=alt.Y("system:N", title=None), yOffset="run:N", color=alt.Color("run:N")
    )
    return alt.layer(
        base.mark_errorbar(ticks=True).encode(x=alt.X("ci_low:Q", title=metric), x2="ci_high:Q"),
        base.mark_point(filled=True, size=60).encode(
            x="value:Q",
            tooltip=[
                "system:N",
                "run:N",
                alt.Tooltip("value:Q", format=".3f"),
                alt.Tooltip("ci_low:Q", format=".3f"),
                alt.Tooltip("ci_high:Q", format=".3f"),
            ],
        ),
    ).properties(height=max(160, 30 * frame["system"].n_unique()))


def retrieved(frame: pl.DataFrame) -> Layered:
    """What each system retrieved at k: one cell per (system, rank), gold traces marked, each cell naming
    its trace by its id in the source file (a LoCoMo turn id such as ``D1:3``; every LoCoMo trace has the
    same medium, so the medium would tell the cells apart nowhere)."""
    frame = frame.with_columns(
        cell=pl.coalesce(pl.col("external_id"), pl.col("medium")).str.slice(0, 16)
    )
    base = alt.Chart(frame).encode(x=alt.X("rank:O", title="rank"), y=alt.Y("system:N", title=None))
    return alt.layer(
        base.mark_rect(stroke="white").encode(
            color=alt.Color(
                "gold:N",
                scale=alt.Scale(domain=[True, False], range=["#2ca02c", "#d9d9d9"]),
                title="gold trace",
            ),
            tooltip=["system:N", "rank:O", "gold:N", "external_id:N", "medium:N", "excerpt:N"],
        ),
        base.mark_text(fontSize=10).encode(text="cell:N"),
    ).properties(height=alt.Step(28), width=alt.Step(110))


def run_durations(frame: pl.DataFrame) -> alt.Chart:
    return (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            x=alt.X("seconds:Q"),
            y=alt.Y("label:N", sort="-x", title=None, axis=alt.Axis(labelLimit=320)),
            color="kind:N",
            tooltip=["label:N", "kind:N", "seconds:Q"],
        )
        .properties(height=alt.Step(26))
    )


def calls_per_stage(frame: pl.DataFrame) -> alt.Chart:
    return (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            x=alt.X("sum(calls):Q", title="LLM calls"),
            y=alt.Y("run:N", title=None, axis=alt.Axis(labelLimit=320)),
            color=alt.Color("stage:N"),
            tooltip=["run:N", "stage:N", "calls:Q", "failed_calls:Q", "tokens:Q"],
        )
        .properties(height=alt.Step(34))
    )


def gym_positions(frame: pl.DataFrame, title: str) -> alt.Chart:
    """One line per system over the gym's evaluation positions (``position``, ``value``, ``system``); the
    bounds, when in the frame, as dashed lines."""
    dashed = alt.condition(
        alt.FieldOneOfPredicate(field="system", oneOf=["random bound", "upper bound"]),
        alt.value([5, 3]),
        alt.value([0]),
    )
    return (
        alt.Chart(frame)
        .mark_line(point=True)
        .encode(
            x=alt.X("position:O", title="evaluation position (after period)"),
            y=alt.Y("value:Q", title=title),
            color=alt.Color("system:N", title=None),
            strokeDash=dashed,
            tooltip=["system:N", "position:O", alt.Tooltip("value:Q", format=".3f")],
        )
    )


def history(series: pl.DataFrame, changes: pl.DataFrame, metric: str, order: list[str]) -> Layered:
    """One metric of each system across evaluations: a point per evaluation with its 95% interval, joined
    by a line, and a dashed rule at each evaluation where some system's provenance changed (the changes
    in its tooltip). The axis is the evaluations in order (``order``: their labels, "3 · 11-27 15:42"),
    not their times: evaluations made minutes apart would otherwise share one column of a time axis."""
    x = alt.X(
        "evaluation:O",
        title="evaluation (in order, with its start time)",
        sort=order,
        axis=alt.Axis(labelAngle=-30, labelLimit=200),
    )
    base = alt.Chart(series).encode(x=x, color=alt.Color("system:N", title="system"))
    layers: list[alt.Chart] = [
        base.mark_errorbar(ticks=True).encode(y=alt.Y("ci_low:Q", title=metric), y2="ci_high:Q"),
        base.mark_line(point=True).encode(
            y="value:Q",
            tooltip=[
                "system:N",
                "k:Q",
                alt.Tooltip("value:Q", format=".3f"),
                alt.Tooltip("ci_low:Q", format=".3f"),
                alt.Tooltip("ci_high:Q", format=".3f"),
                "n:Q",
                alt.Tooltip("started_at:T", format="%Y-%m-%d %H:%M:%S"),
                "eval_run_id:N",
                *[f"{c}:N" for c in ("mode", "questions") if c in series.columns],
            ],
        ),
    ]
    if changes.height:
        layers.append(
            alt.Chart(changes)
            .mark_rule(strokeDash=[5, 3], color="#c0392b")
            .encode(x=alt.X("evaluation:O", sort=order), tooltip=["evaluation:N", "changes:N"])
        )
    return alt.layer(*layers).properties(height=300)


def calls_by_stage(frame: pl.DataFrame) -> alt.Chart:
    """Calls per stage, stacked by outcome."""
    return (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            x=alt.X("calls:Q"),
            y=alt.Y("stage:N", title=None, sort="-x", axis=alt.Axis(labelLimit=240)),
            color=alt.Color(
                "outcome:N",
                scale=alt.Scale(
                    domain=[
                        "ok",
                        "invalid_output",
                        "transient_error",
                        "permanent_error",
                        "disabled",
                    ],
                    range=["#54a24b", "#f58518", "#eeca3b", "#e45756", "#bab0ac"],
                ),
            ),
            tooltip=["stage:N", "outcome:N", "calls:Q"],
        )
        .properties(height=alt.Step(24))
    )
