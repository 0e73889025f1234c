"""From per-question metrics to what people read: aggregates with bootstrap intervals, the typed
evaluation result (the `evaluate --json` contract) and the leaderboard text (the paper's Tables 3–4)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from clonemem.evaluation import metrics as M
from clonemem.schemas.results import (
    DIAGNOSIS,
    EFFICIENCY,
    METRICS,
    PRIVACY,
    Diagnosis,
    EvaluationResult,
    PrivacyScores,
    Provenance,
    SystemScores,
    TypeScores,
)

# group name -> the per-question columns it groups by (besides system and k)
GROUPS: dict[str, list[str]] = {
    "all": [],
    "persona": ["persona_id"],
    "question_type": ["question_type"],
    "dimension": ["dimension"],
}


def aggregates(
    per_question: pl.DataFrame,
    samples: int,
    seed: int,
    by: M.Aggregate = "questions",
    exclude_no_evidence: bool = False,
) -> dict[str, pl.DataFrame]:
    """Every metric's mean, n and 95% bootstrap CI per system, k and each group of :data:`GROUPS`:
    over questions or as the mean of persona means (``by``), with recall over the questions that have
    evidence only if ``exclude_no_evidence`` (the paper's figures: ``by="personas"`` and both)."""
    frame = M.without_evidence_excluded(per_question) if exclude_no_evidence else per_question
    return {g: M.aggregate(frame, cols, samples, seed, by=by) for g, cols in GROUPS.items()}


def _scores(agg: pl.DataFrame) -> dict[str, Any]:
    values = {r["metric"]: r for r in agg.iter_rows(named=True)}
    out: dict[str, Any] = {}
    for metric in METRICS:
        row = values.get(metric)
        out[metric] = None if row is None else row["value"]
        out[f"{metric}_ci"] = (
            None if row is None or row["ci_low"] is None else [row["ci_low"], row["ci_high"]]
        )
    return out


def _diagnosis(agg: pl.DataFrame) -> Diagnosis:
    values = {r["metric"]: r for r in agg.iter_rows(named=True) if r["metric"] in DIAGNOSIS}
    if not values:
        return Diagnosis()
    return Diagnosis(
        **{m: values[m]["value"] for m in values},
        n=max(r["n"] for r in values.values()),
        ci={
            m: None if r["ci_low"] is None else [r["ci_low"], r["ci_high"]]
            for m, r in values.items()
        },
    )


def _privacy(agg: pl.DataFrame) -> PrivacyScores:
    values = {r["metric"]: r for r in agg.iter_rows(named=True) if r["metric"] in PRIVACY}
    if not values or not any(r["n"] for r in values.values()):
        return PrivacyScores()
    return PrivacyScores(
        **{m: values[m]["value"] for m in values},
        n=values["privacy_violation"]["n"],
        ci={
            m: None if r["ci_low"] is None else [r["ci_low"], r["ci_high"]]
            for m, r in values.items()
        },
    )


def _where(frame: pl.DataFrame, **equal: object) -> pl.DataFrame:
    if not frame.height:
        return frame
    cond = pl.lit(True)
    for col, value in equal.items():
        cond = cond & (pl.col(col) == value)
    return frame.filter(cond)


def evaluation_result(
    per_question: pl.DataFrame,
    aggs: Mapping[str, pl.DataFrame],
    stats: Mapping[str, Mapping],
    systems: Sequence[str],
    ks: Sequence[int],
    *,
    benchmark: str,
    benchmark_id: str,
    eval_run_id: str,
    offline: bool,
    seconds: float = 0.0,
    provenance: Provenance | None = None,
    reused: bool = False,
) -> EvaluationResult:
    """The result per (system, k) and per question type, in the order systems and k were asked for."""
    results, by_type = [], []
    for s in systems:
        for k in ks:
            sub = _where(per_question, system=s, k=k)
            tokens = sub["context_tokens"].mean() if sub.height else None
            overall = _where(aggs["all"], system=s, k=k)
            results.append(
                SystemScores(
                    system=s,
                    k=k,
                    n_questions=sub.height,
                    **_scores(overall),
                    diagnosis=_diagnosis(overall),
                    privacy=_privacy(overall),
                    context_tokens=None if tokens is None else float(tokens),  # type: ignore[arg-type]  # pydantic coerces the numpy scalar
                    **{m: stats[s].get(m) for m in EFFICIENCY if m != "context_tokens"},
                )
            )
            for qtype in sorted(set(sub["question_type"].to_list())):
                tsub = sub.filter(pl.col("question_type") == qtype)
                typed = _where(aggs["question_type"], system=s, k=k, question_type=qtype)
                by_type.append(
                    TypeScores(
                        system=s,
                        k=k,
                        question_type=qtype,
                        n_questions=tsub.height,
                        **_scores(typed),
                        diagnosis=_diagnosis(typed),
                        privacy=_privacy(typed),
                    )
                )
    return EvaluationResult(
        benchmark=benchmark,
        benchmark_id=benchmark_id,
        eval_run_id=eval_run_id,
        offline=offline,
        results=results,
        by_question_type=by_type,
        seconds=seconds,
        provenance=provenance,
        reused=reused,
    )


LEADERBOARD_COLUMNS = (
    ("recall_flat", "R-flat"),
    ("recall_all_any", "R-all-any"),
    ("recall_any_any", "R-any-any"),
    ("choice_accuracy", "choice"),
    ("qa_consistency", "QA-cons"),
    ("mem_recall", "mem-rec"),
    ("mem_helpful", "mem-help"),
    ("context_tokens", "ctx-tok"),
)
DIAGNOSIS_COLUMNS = (
    ("write_failure", "fail-W"),
    ("read_failure", "fail-R"),
    ("utilization_failure", "fail-U"),
)
# privacy tasks: violation (any sensitive item disclosed; lower is better) and completeness
PRIVACY_COLUMNS = (("privacy_violation", "viol"), ("privacy_completeness", "compl"))


def models_label(result: EvaluationResult) -> str:
    """Which roles were the offline heuristics, exactly: ``offline judge`` when only the judge was (the
    answerer a live model), ``offline answerer and judge`` when both were; ``live models`` otherwise."""
    prov = result.provenance
    if not result.offline:
        return "live models"
    if prov is None:
        return "offline answerer or judge"
    roles = [
        r
        for r, ref in (("answerer", prov.answerer), ("judge", prov.judge))
        if ref.split("/", 1)[0] == "offline"
    ]
    return f"offline {' and '.join(roles)}" if roles else "offline answerer or judge"


def leaderboard(result: EvaluationResult) -> str:
    """A table like the paper's Tables 3–4: retrieval and QA metrics per system and k."""
    head = (
        f"{'system':<18}{'k':>4}"
        + "".join(f"{label:>11}" for _, label in LEADERBOARD_COLUMNS)
        + "".join(f"{label:>8}" for _, label in (*DIAGNOSIS_COLUMNS, *PRIVACY_COLUMNS))
    )
    lines = [
        f"benchmark {result.benchmark} ({models_label(result)}); "
        "fail-W/R/U: share of questions failed at writing, reading or using the memory; viol/compl: privacy "
        "tasks with a sensitive item disclosed (lower is better) / share of necessary items conveyed",
        head,
        "-" * len(head),
    ]
    for r in result.results:
        cells = "".join(
            f"{v:>11.3f}" if isinstance(v := getattr(r, m), float) else f"{'-':>11}"
            for m, _ in LEADERBOARD_COLUMNS
        )
        cells += "".join(
            f"{v:>8.3f}" if isinstance(v := getattr(r.diagnosis, m), float) else f"{'-':>8}"
            for m, _ in DIAGNOSIS_COLUMNS
        )
        cells += "".join(
            f"{v:>8.3f}" if isinstance(v := getattr(r.privacy, m), float) else f"{'-':>8}"
            for m, _ in PRIVACY_COLUMNS
        )
        lines.append(f"{r.system:<18}{r.k:>4}{cells}")
    return "\n".join(lines)


def leaderboard_markdown(result: EvaluationResult) -> str:
    """The leaderboard as a Markdown table with 95% intervals (Prefect artifacts, the README): the metrics,
    then the failure diagnosis (fail-W/R/U: the share of questions whose first failing step was writing,
    reading or using the memory, as the warehouse and the dashboard have it)."""
    metrics = [m for m, _ in LEADERBOARD_COLUMNS if m != "context_tokens"]
    labels = [label for m, label in LEADERBOARD_COLUMNS if m != "context_tokens"] + [
        label for _, label in (*DIAGNOSIS_COLUMNS, *PRIVACY_COLUMNS)
    ]
    lines = ["| system | k | " + " | ".join(labels) + " |", "|" + "---|" * (2 + len(labels))]
    for r in result.results:
        cells = [_cell(getattr(r, m), getattr(r, f"{m}_ci")) for m in metrics]
        cells += [
            _cell(getattr(r.diagnosis, m), r.diagnosis.ci.get(m)) for m, _ in DIAGNOSIS_COLUMNS
        ]
        cells += [_cell(getattr(r.privacy, m), r.privacy.ci.get(m)) for m, _ in PRIVACY_COLUMNS]
        lines.append(f"| {r.system} | {r.k} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _cell(value: float | None, ci: list[float] | None) -> str:
    return "–" if value is None else f"{value:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")


def provenance_markdown(prov: Provenance) -> str:
    """Where the numbers came from, as Markdown (the leaderboard artifact)."""
    commit = (
        "not run from a git checkout"
        if prov.git_commit is None
        else f"`{prov.git_commit[:12]}`" + (" (uncommitted changes)" if prov.git_dirty else "")
    )
    agg = (
        "mean of persona means"
        if prov.aggregation.aggregate == "personas"
        else "mean over questions"
    ) + (
        "; recall leaves out questions without evidence"
        if prov.aggregation.exclude_no_evidence
        else ""
    )
    lines = [
        f"clonemem {prov.project_version or '?'}, commit {commit}; answerer `{prov.answerer}`, judge `{prov.judge}`; "
        f"aggregation: {agg}.",
        "",
        "Packages: " + ", ".join(f"{p} {v or '–'}" for p, v in sorted(prov.packages.items())),
        "",
        "| system | code hash | stage models | extra |",
        "|---|---|---|---|",
    ]
    for s in prov.systems:
        stages = ", ".join(f"{k}: `{v}`" for k, v in s.llm_stages.items()) or "–"
        extra = ", ".join(f"{k}: {v}" for k, v in s.extra.items()) or "–"
        code = f"`{s.code_hash}`" if s.code_hash else "– (remote)"
        lines.append(f"| {s.system} | {code} | {stages} | {extra} |")
    return "\n".join(lines)
