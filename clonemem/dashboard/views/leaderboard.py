"""Leaderboard: the benchmark's board across evaluations (the latest evaluation of every system, comparable
rows ranked together, the others apart with the reason: ``clonemem/evaluation/leaderboard.py``); then one
evaluation in detail: systems ranked by a headline metric per k with 95% bootstrap intervals, every metric
(and the failure diagnosis apart), by question type, dimension, persona and LoCoMo's own categories,
efficiency, and two evaluations of the benchmark side by side (on the systems they share). Figures the offline answerer or judge
produced are labelled as such."""

from __future__ import annotations

import polars as pl
import streamlit as st

from clonemem.dashboard import analysis as A
from clonemem.dashboard import charts
from clonemem.dashboard import queries as Q
from clonemem.dashboard.context import Session, pick_run, run_page
from clonemem.dashboard.producers import EvalModels, models_of
from clonemem.evaluation import leaderboard as L
from clonemem.evaluation.metrics import aggregate
from clonemem.schemas.results import DIAGNOSIS, METRICS, PROTOCOL_METRICS, ProtocolRow

TITLE = "Leaderboard"
PREFERRED_METRICS = ("recall_flat", "choice_accuracy", "recall_any_any", "qa_consistency")


def render(session: Session) -> None:
    db, bench = session.db, session.benchmark
    runs = Q.eval_runs(db, bench["benchmark_id"])
    if runs.height == 0:
        st.info(
            f"Benchmark {bench['name']!r} has not been evaluated yet: "
            f"`clonemem evaluate {bench['name']} --systems bm25,random --k 5,10`"
            + (
                " (add `--force` while its gate has not passed)."
                if bench["gate_status"] != "passed"
                else "."
            )
        )
        return
    _board(session)
    st.header("One evaluation in detail")
    eval_run_id, labels = pick_run(runs, "eval_run_id", "systems", "Evaluation", key="lb_eval")
    overall = Q.metrics(db, eval_run_id, "all")
    if overall.height == 0:
        st.info("This evaluation recorded no metrics.")
        return
    models = models_of(db, eval_run_id, session.columns("eval_runs"))
    if models.banner():
        st.warning(models.banner())
    names = overall["metric"].unique().sort().to_list()
    default = next((m for m in PREFERRED_METRICS if m in names), names[0])
    metric = st.selectbox(
        "Metric (the ranking's headline)",
        names,
        index=names.index(default),
        key="lb_metric",
        format_func=models.label,
    )
    chosen = overall.filter(pl.col("metric") == metric).drop("group_value", "metric")
    st.subheader(f"{models.label(metric)} per system and k")
    if chosen["value"].is_null().all():
        st.info(
            f"{metric} was not computed in this evaluation (e.g. choice accuracy of free-text-only items)."
        )
    else:
        st.altair_chart(charts.leaderboard(chosen.drop_nulls("value"), metric))
    ranked = chosen.with_columns(
        rank=pl.col("value").rank("min", descending=True).over("k").cast(pl.Int64)
    )
    st.dataframe(
        ranked.sort("k", "rank", "system", nulls_last=True).select("rank", *chosen.columns),
        hide_index=True,
    )
    ks = sorted(overall["k"].unique().to_list())
    k = st.selectbox("k for the tables below", ks, key=f"lb_k_{eval_run_id}")
    _every_metric(overall, metric, k, models)
    _privacy(overall, models)
    _groups(session, eval_run_id, metric, k, models)
    _efficiency(session, eval_run_id)
    _provenance(session, eval_run_id)
    _compare(session, runs, eval_run_id, metric, labels)


def _board(session: Session) -> None:
    """The benchmark's leaderboard across evaluations (``clonemem leaderboard``): the latest evaluation of
    every system, comparable rows ranked together, the others apart with the reason."""
    db, bench = session.db, session.benchmark
    assert db is not None and bench is not None  # a page renders only with both (context.run_page)
    rows = L.evaluated(Q.system_evaluations(db, bench["benchmark_id"]))
    pairs = [(e.eval_run_id, s) for s, e in L.latest(rows).items()]
    metrics = Q.system_metrics(db, pairs)
    if metrics.height == 0:
        st.info("No evaluation of this benchmark recorded metrics.")
        return
    names = sorted(metrics["metric"].unique().to_list())
    default = next((m for m in PREFERRED_METRICS if m in names), names[0])
    metric = st.selectbox("Rank by", names, index=names.index(default), key="board_metric")
    ks = sorted(metrics["k"].unique().to_list())
    k = st.selectbox("k", ks, key="board_k")
    board = L.board(bench["name"], rows, metrics, metric, k)
    st.subheader(f"Leaderboard of {bench['name']!r} at k = {k}")
    st.caption(
        "The latest evaluation of every system on this benchmark, whichever run produced it (the "
        "built-ins evaluated together, a system evaluated alone, a results file). Rows are ranked together "
        "only when comparable: the same benchmark content, k, aggregation, answerer and judge, retrieval "
        "mode and questions. Each row names its evaluation, its provenance and what changed since that "
        "system's previous evaluation."
    )
    for group in board.groups:
        table = _board_table(group, metric)
        if group.reason is None:
            first = group.rows[0]
            st.markdown(
                f"**Main table**: mode `{first.mode}`, {first.sample}, answerer `{first.answerer}`, "
                f"judge `{first.judge}`, {first.aggregation}"
            )
            chart = table.select(
                "system",
                pl.lit(k).alias("k"),
                "n",
                pl.col(metric).alias("value"),
                "ci_low",
                "ci_high",
            ).drop_nulls("value")
            if chart.height:
                st.altair_chart(charts.leaderboard(chart, metric))
            st.dataframe(table, hide_index=True)
            _by_type(session, group, metric)
            _protocols(session, group)
        else:
            st.markdown(f"**Apart** (not comparable with the main table: {group.reason})")
            st.dataframe(table, hide_index=True)


def _board_table(group: L.Group, metric: str) -> pl.DataFrame:
    shown = [m for m in L.SHOWN if m != metric]
    return pl.DataFrame(
        [
            {
                "rank": r.rank,
                "system": r.system,
                "mode": r.mode,
                "questions": r.sample,
                "value": (f := r.metrics.get(metric)) and f.value,
                "ci_low": f and f.ci_low,
                "ci_high": f and f.ci_high,
                "n": f.n if f else None,
                **{m: (g.value if (g := r.metrics.get(m)) else None) for m in shown},
                "offline": r.offline,
                "eval_run_id": r.eval_run_id,
                "provenance": L.identity(r),
                "changed since previous": "; ".join(r.changes),
            }
            for r in group.rows
        ],
        schema_overrides={
            "rank": pl.Int64,
            "value": pl.Float64,
            "ci_low": pl.Float64,
            "ci_high": pl.Float64,
            "n": pl.Int64,
            **{m: pl.Float64 for m in shown},
        },
    ).rename({"value": metric})


def _by_type(session: Session, group: L.Group, metric: str) -> None:
    """The main table's systems on ``metric`` per question type, each from its own evaluation."""
    assert session.db is not None
    per_type = Q.system_metrics(
        session.db, [(r.eval_run_id, r.system) for r in group.rows], "question_type"
    )
    per_type = (
        per_type.filter((pl.col("metric") == metric) & (pl.col("k") == group.k))
        if per_type.height
        else per_type
    )
    if per_type.height == 0:
        return
    st.markdown(
        f"**{metric} by question type** (the main table's rows; 95% intervals in the tooltip)"
    )
    st.altair_chart(
        charts.by_group(per_type.drop_nulls("value"), metric, "question_type"), width="stretch"
    )


def _protocols(session: Session, group: L.Group) -> None:
    """Where the main table's evaluations computed standard protocols (LoCoMo, Mem0, LongMemEval,
    PersonaMem): one protocol's figures per system and category or type, with intervals."""
    assert session.db is not None
    records = Q.protocol_metrics(session.db, [(r.eval_run_id, r.system) for r in group.rows])
    if records.height == 0:
        return
    records = records.filter((pl.col("granularity") != "qa") | (pl.col("k") == group.k))
    protocols = sorted(records["protocol"].unique().to_list())
    protocol = st.selectbox("Standard protocol", protocols, key="board_protocol")
    rows = [
        r.model_dump(mode="json")
        for r in ProtocolRow.merged(
            records.filter(pl.col("protocol") == protocol).iter_rows(named=True)
        )
    ]
    metrics = [m for m in PROTOCOL_METRICS if any(m in r for r in rows)]
    st.markdown(
        f"**{protocol}** (its own rules and groups, `clonemem leaderboard --protocol {protocol}`)"
    )
    st.dataframe(
        pl.DataFrame(
            [
                {
                    "system": r["system"],
                    "group": r["group"],
                    "granularity": r.get("granularity"),
                    "n": r["n"],
                    **{
                        c: v
                        for m in metrics
                        for c, v in (
                            (m, r.get(m)),
                            (f"{m}_low", (r.get(f"{m}_ci") or [None, None])[0]),
                            (f"{m}_high", (r.get(f"{m}_ci") or [None, None])[1]),
                        )
                    },
                }
                for r in rows
            ]
        ),
        hide_index=True,
    )


def _every_metric(overall: pl.DataFrame, metric: str, k: int, models: EvalModels) -> None:
    """Every metric at k, systems ranked by the headline metric (descending); the failure diagnosis, shares
    of questions rather than scores, in a table of its own."""
    wide = overall.filter(pl.col("k") == k).pivot(on="metric", index="system", values="value")
    wide = wide.with_columns(rank=pl.col(metric).rank("min", descending=True).cast(pl.Int64)).sort(
        "rank", "system", nulls_last=True
    )
    scores = [m for m in METRICS if m in wide.columns] + [
        m for m in wide.columns if m not in (*METRICS, *DIAGNOSIS, "system", "rank")
    ]
    st.markdown(
        f"**Every metric at k = {k}, ranked by {models.label(metric)}** (point estimates; intervals "
        "in the table above per metric)"
    )
    st.dataframe(
        wide.select("rank", "system", *scores).rename({m: models.label(m) for m in scores}),
        hide_index=True,
    )
    diagnosis = [m for m in DIAGNOSIS if m in wide.columns]
    if diagnosis:
        st.markdown(
            f"**Failure diagnosis at k = {k}**: the share of questions whose first failing step is writing "
            "the evidence, reading it back, or using it (or none: correct); the four add up to 1"
        )
        st.dataframe(
            wide.select("rank", "system", *diagnosis).rename(
                {m: models.label(m) for m in diagnosis}
            ),
            hide_index=True,
        )


def _privacy(overall: pl.DataFrame, models: EvalModels) -> None:
    """Privacy tasks: each system's violation rate against its completeness (LifeSide's view), with intervals."""
    points = A.privacy_points(overall)
    if points.height == 0:
        return
    st.subheader("Privacy: violation against completeness")
    st.caption(
        "Contextual disclosure and boundary defense tasks: the share with any sensitive item disclosed "
        "(violation, lower is better) against the share of necessary items conveyed (completeness), "
        "per system with 95% bootstrap intervals."
        + (
            " Offline heuristics: "
            + ", ".join(f"the {role}" for role in models.offline_roles("privacy_violation"))
            + " (the offline judge decides by content overlap)."
            if models.offline_roles("privacy_violation")
            else ""
        )
    )
    st.altair_chart(charts.privacy_tradeoff(points))
    st.dataframe(points, hide_index=True)


SOURCE_CATEGORY = (
    "source category"  # LoCoMo's own categories (questions.source_category and its label)
)


def _groups(session: Session, eval_run_id: str, metric: str, k: int, models: EvalModels) -> None:
    st.subheader(f"{models.label(metric)} at k = {k} by group")
    options = ["question_type", "dimension", "persona"]
    if Q.has_source_categories(session.db, session.benchmark["benchmark_id"]):
        options.append(SOURCE_CATEGORY)
    group = st.radio("Group by", options, horizontal=True, key="lb_group")
    if group == SOURCE_CATEGORY:
        frame = source_category_metrics(Q.source_category_scores(session.db, eval_run_id))
        frame = (
            frame.filter((pl.col("metric") == metric) & (pl.col("k") == k))
            if frame.height
            else frame
        )
        st.caption(
            "LoCoMo's own question categories (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, "
            "5 adversarial, with the label its file gives): means over questions with 95% bootstrap "
            "intervals computed here from the stored per-question scores."
        )
    else:
        frame = Q.metrics(session.db, eval_run_id, group).filter(
            (pl.col("metric") == metric) & (pl.col("k") == k)
        )
    if group == "persona":
        names = {
            r["persona_id"]: r["person_name"]
            for r in Q.personas(session.db, session.benchmark["benchmark_id"]).iter_rows(named=True)
        }
        frame = frame.with_columns(pl.col("group_value").replace(names))
    if frame.height == 0 or frame["value"].is_null().all():
        st.info(f"No {metric} values by {group} at k = {k}.")
        return
    st.altair_chart(charts.by_group(frame.drop_nulls("value"), metric, group), width="stretch")
    st.dataframe(frame.drop("metric", "k"), hide_index=True)


def source_category_metrics(
    scores: pl.DataFrame, samples: int = 1000, seed: int = 0
) -> pl.DataFrame:
    """Every metric per system, k and source category (as ``group_value``): mean, n and 95% bootstrap CI."""
    if scores.height == 0:
        return pl.DataFrame()
    got = aggregate(
        scores.rename({"source_category": "group_value"}), ["group_value"], samples, seed
    )
    return got.select(
        "system", "k", "group_value", "metric", "n", "value", "ci_low", "ci_high"
    ).sort("metric", "k", "system", "group_value")


def _efficiency(session: Session, eval_run_id: str) -> None:
    st.subheader("Efficiency")
    frame = Q.efficiency(session.db, eval_run_id)
    st.caption(
        "Mean context tokens handed to the answerer (per k), index build time, retrieval latency "
        "percentiles, and the LLM calls and tokens the memory system spent itself."
    )
    st.dataframe(frame, hide_index=True)


def _provenance(session: Session, eval_run_id: str) -> None:
    st.subheader("Provenance")
    prov = Q.eval_provenance(session.db, eval_run_id, session.columns("eval_runs"))
    if prov is None:
        st.info(
            "This evaluation was stored without provenance (before it was recorded): its code, models "
            "and package versions are unknown."
        )
        return
    commit = (
        "not run from a git checkout"
        if prov.git_commit is None
        else f"commit {prov.git_commit[:12]}"
        + (" with uncommitted changes" if prov.git_dirty else "")
    )
    agg = (
        "mean of persona means"
        if prov.aggregation.aggregate == "personas"
        else "mean over questions"
    ) + (
        ", recall without questions lacking evidence"
        if prov.aggregation.exclude_no_evidence
        else ""
    )
    st.caption(
        f"clonemem {prov.project_version or '?'}, {commit}; answerer {prov.answerer}, judge {prov.judge}; "
        f"aggregation: {agg}. Packages: "
        + ", ".join(f"{name} {version or '–'}" for name, version in sorted(prov.packages.items()))
    )
    st.dataframe(
        pl.DataFrame(
            [
                {
                    "system": s.system,
                    "code_hash": s.code_hash,
                    "stage_models": ", ".join(f"{k}={v}" for k, v in s.llm_stages.items()),
                    "extra": ", ".join(f"{k}={v}" for k, v in s.extra.items()),
                }
                for s in prov.systems
            ],
            schema=["system", "code_hash", "stage_models", "extra"],
        ),
        hide_index=True,
    )


def _provenance_difference(session: Session, a: str, b: str, shared: list[str]) -> None:
    """Say whether the two evaluations' numbers for the systems they share came from the same code,
    models, packages and aggregation."""
    columns = session.columns("eval_runs")
    pa, pb = Q.eval_provenance(session.db, a, columns), Q.eval_provenance(session.db, b, columns)
    if pa is None or pb is None:
        st.warning(
            "Provenance unknown for "
            + (
                "both evaluations"
                if pa is None and pb is None
                else "evaluation " + ("A" if pa is None else "B")
            )
            + ": they may differ in code, models or package versions."
        )
        return
    differences = pa.differences(pb, systems=shared)
    if differences:
        st.warning("These evaluations differ in provenance (A → B): " + "; ".join(differences))
    else:
        st.caption(
            f"Same provenance for {', '.join(shared)}: code, stage models, answerer, judge, package "
            "versions and aggregation."
        )


def _compare(
    session: Session, runs: pl.DataFrame, eval_run_id: str, metric: str, labels: dict[str, str]
) -> None:
    st.subheader("Two evaluations side by side")
    others = [r for r in runs["eval_run_id"].to_list() if r != eval_run_id]
    if not others:
        st.info(
            f"Only one evaluation of {session.benchmark['name']!r}; evaluate it again (`--force`) "
            "to compare two runs here."
        )
        return
    # by default the newest evaluation that differs from A (copies of it would show every difference as 0)
    default = A.first_different(
        Q.eval_identities(
            session.db, session.benchmark["benchmark_id"], session.columns("eval_runs")
        ),
        eval_run_id,
        others,
    )
    other = st.selectbox(
        "Compare with",
        others,
        index=others.index(default),
        format_func=labels.__getitem__,
        key="lb_other",
    )
    db = session.db
    assert db is not None
    shared = sorted(
        set(Q.eval_systems(db, eval_run_id)["system"].to_list())
        & set(Q.eval_systems(db, other)["system"].to_list())
    )
    if not shared:
        st.info(
            "These two evaluations share no system: there is nothing to set side by side. The leaderboard "
            "above ranks each system's latest evaluation, with the others where they are comparable."
        )
        return
    _provenance_difference(session, eval_run_id, other, shared)
    both = pl.concat(
        [
            Q.metrics(session.db, run_id, "all")
            .filter(pl.col("metric") == metric)
            .with_columns(run=pl.lit(name))
            for run_id, name in (
                (eval_run_id, "A: " + labels[eval_run_id][:30]),
                (other, "B: " + labels[other][:30]),
            )
        ]
    )
    if both.height == 0:
        st.info(f"Neither evaluation has {metric}.")
        return
    ks = sorted(both["k"].unique().to_list())
    k = st.selectbox("k", ks, key="lb_compare_k")
    at_k = both.filter(pl.col("k") == k)
    if at_k.drop_nulls("value").height:
        st.altair_chart(charts.compare_runs(at_k.drop_nulls("value"), metric), width="stretch")
    a, b = (
        at_k.filter(pl.col("run").str.starts_with(p) & pl.col("system").is_in(shared)).select(
            "system", "value", "ci_low", "ci_high"
        )
        for p in ("A:", "B:")
    )
    table = a.join(b, on="system", how="inner", suffix="_b").with_columns(
        difference=pl.col("value_b") - pl.col("value"),
        intervals_overlap=(pl.col("ci_low") <= pl.col("ci_high_b"))
        & (pl.col("ci_low_b") <= pl.col("ci_high")),
    )
    st.dataframe(
        table.rename({"value": "value_a", "ci_low": "ci_low_a", "ci_high": "ci_high_a"}).sort(
            "system"
        ),
        hide_index=True,
    )


if __name__ == "__main__":
    run_page(
        TITLE,
        render,
        about="How the memory systems score on this benchmark, with 95% bootstrap intervals.",
    )
