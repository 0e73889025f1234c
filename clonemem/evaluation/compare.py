"""Two or more systems on the same questions (MemoryBench's ``compare``): per question type, the mean
difference of each system from the first, with a paired 95% bootstrap interval (the questions are
resampled once for both sides: the interval of the mean per-question difference, through the same
``bootstrap_ci`` the leaderboard's intervals use), and the questions on which they disagree most.
A question only one side was asked (a quick run) is left out of the pairing and counted.

``failures`` lists one system's missed questions with what it retrieved (MemoryBench's
``show-failures``). Pure functions over ``clonemem/warehouse/leaderboard.py``'s rows.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import numpy as np
import polars as pl
from pydantic import BaseModel, ConfigDict

from clonemem.evaluation.metrics import bootstrap_ci, top_k_unique
from clonemem.warehouse import leaderboard as W

FORMAT_VERSION = "1.0"  # of `clonemem compare --json`
OVERALL = "all"


class _M(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Difference(_M):
    """``system`` minus the baseline on ``metric`` over the ``n`` questions both were asked (a type)."""

    system: str
    baseline: str
    question_type: str
    n: int
    baseline_value: float | None
    value: float | None
    difference: float | None
    ci_low: float | None
    ci_high: float | None

    @property
    def significant(self) -> bool:
        """The interval excludes 0."""
        return (
            self.ci_low is not None
            and self.ci_high is not None
            and (self.ci_low > 0 or self.ci_high < 0)
        )


class Disagreement(_M):
    question: str  # its release id
    question_type: str
    text: str
    values: dict[str, float | None]  # system -> the metric on this question
    spread: float


class Comparison(_M):
    format_version: str = FORMAT_VERSION
    benchmark: str
    metric: str
    k: int
    systems: list[str]
    eval_run_ids: dict[str, str]
    unpaired: int  # questions not asked of every system, left out
    differences: list[Difference]
    disagreements: list[Disagreement]
    warnings: list[str] = []


def _paired(scores: pl.DataFrame, systems: Sequence[str], metric: str) -> pl.DataFrame:
    """One row per question every system was asked and scored on ``metric``: its type, text, id and a
    column per system."""
    wide = None
    for s in systems:
        part = scores.filter(pl.col("system") == s).select(
            "question_id", "question_type", "external_id", "question", pl.col(metric).alias(s)
        )
        wide = (
            part
            if wide is None
            else wide.join(part.select("question_id", s), on="question_id", how="inner")
        )
    assert wide is not None
    return wide.drop_nulls(list(systems)).sort("question_id")


def compare(
    benchmark: str,
    scores: pl.DataFrame,
    systems: Sequence[str],
    eval_run_ids: Mapping[str, str],
    metric: str,
    k: int,
    samples: int = 1000,
    seed: int = 0,
    top: int = 10,
    warnings: Sequence[str] = (),
) -> Comparison:
    """Each of ``systems[1:]`` against ``systems[0]`` per question type and over all questions, from
    per-question ``scores`` (``warehouse.leaderboard.question_scores`` rows) of their evaluations."""
    if metric not in scores.columns:
        raise ValueError(f"no per-question metric {metric!r}")
    paired = _paired(scores, systems, metric)
    asked = scores.group_by("question_id").agg(pl.col("system").n_unique().alias("n"))
    unpaired = asked.filter(pl.col("n") < len(systems)).height
    base = systems[0]
    out: list[Difference] = []
    types = [OVERALL, *sorted(set(paired["question_type"].to_list()))]
    for other in systems[1:]:
        for qtype in types:
            part = paired if qtype == OVERALL else paired.filter(pl.col("question_type") == qtype)
            a = part[base].to_numpy().astype(np.float64)
            b = part[other].to_numpy().astype(np.float64)
            lo, hi = bootstrap_ci(b - a, samples, seed) if a.size else (None, None)
            out.append(
                Difference(
                    system=other,
                    baseline=base,
                    question_type=qtype,
                    n=int(a.size),
                    baseline_value=float(a.mean()) if a.size else None,
                    value=float(b.mean()) if b.size else None,
                    difference=float((b - a).mean()) if a.size else None,
                    ci_low=lo,
                    ci_high=hi,
                )
            )
    spread = pl.max_horizontal(*systems) - pl.min_horizontal(*systems)
    worst = (
        paired.with_columns(spread.alias("spread"))
        .filter(pl.col("spread") > 0)
        .sort(["spread", "external_id"], descending=[True, False])
        .head(top)
    )
    disagreements = [
        Disagreement(
            question=r["external_id"],
            question_type=r["question_type"],
            text=r["question"],
            values={s: r[s] for s in systems},
            spread=r["spread"],
        )
        for r in worst.iter_rows(named=True)
    ]
    return Comparison(
        benchmark=benchmark,
        metric=metric,
        k=k,
        systems=list(systems),
        eval_run_ids=dict(eval_run_ids),
        unpaired=unpaired,
        differences=out,
        disagreements=disagreements,
        warnings=list(warnings),
    )


class Failure(_M):
    """A question the system missed at k: what it should have found and what it retrieved."""

    question: str  # release id
    question_type: str
    text: str
    recall_flat: float | None
    choice_accuracy: float | None
    diagnosis: str | None  # write, read, use (the first failing step), or None
    choice: str | None
    correct_choice: str | None
    gold: list[str]  # release trace ids
    retrieved: list[str]  # release trace ids at k, rank order, de-duplicated
    texts: list[str]  # the retrieved items' texts, cut


def failures(
    rows: pl.DataFrame, k: int, release_ids: Mapping[str, str], cut: int = 160
) -> list[Failure]:
    """``warehouse.leaderboard.missed_questions`` rows as failures; trace ids shown by release id."""
    out = []
    for r in rows.iter_rows(named=True):
        retrieved = top_k_unique(json.loads(r["retrieved"] or "[]"), k)
        items = json.loads(r["items"] or "[]")
        texts = [str(i.get("text", ""))[:cut] for i in items[:k]]
        out.append(
            Failure(
                question=r["external_id"],
                question_type=r["question_type"],
                text=r["question"],
                recall_flat=r["recall_flat"],
                choice_accuracy=r["choice_accuracy"],
                diagnosis=r["diagnosis"],
                choice=r["predicted_choice_id"],
                correct_choice=r["correct_choice_id"],
                gold=list(r["gold"] or []),
                retrieved=[release_ids.get(t, t) for t in retrieved],
                texts=texts,
            )
        )
    return out


def read_comparison(
    query: W.Query,
    benchmark_id: str,
    benchmark: str,
    systems: Sequence[str],
    metric: str,
    k: int | None,
    samples: int = 1000,
    seed: int = 0,
    top: int = 10,
) -> Comparison:
    """``compare`` over each system's latest evaluation on the benchmark (its leaderboard row)."""
    from clonemem.evaluation.leaderboard import not_comparable, read_board, rows_of

    k, rows = rows_of(read_board(query, benchmark_id, benchmark, metric), systems, k)
    scores = W.question_scores(query, [(r.eval_run_id, s) for s, r in rows.items()], k)
    return compare(
        benchmark,
        scores,
        systems,
        {s: r.eval_run_id for s, r in rows.items()},
        metric,
        k,
        samples,
        seed,
        top,
        not_comparable(rows),
    )


def read_failures(
    query: W.Query, benchmark_id: str, benchmark: str, system: str, k: int | None, limit: int = 20
) -> tuple[str, int, list[Failure]]:
    """The system's missed questions at k in its latest evaluation: (evaluation id, k, failures)."""
    from clonemem.evaluation.leaderboard import read_board, rows_of

    k, rows = rows_of(read_board(query, benchmark_id, benchmark), [system], k)
    eid = rows[system].eval_run_id
    missed = W.missed_questions(query, eid, system, k, limit)
    ids = sorted(
        {t for r in missed.iter_rows(named=True) for t in json.loads(r["retrieved"] or "[]")}
    )
    return eid, k, failures(missed, k, W.release_ids(query, ids))
