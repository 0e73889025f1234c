"""The CloneMem metrics (paper D.1), exactly as specified, and their aggregation.

Per question, each evidence item's trace-id list is one evidence set; retrieved trace ids are
de-duplicated in rank order and cut at K. Evidence items without ids are skipped; a question with
no (non-empty) evidence set scores 0 on every recall variant.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Literal

import numpy as np
import polars as pl
from threadpoolctl import threadpool_limits

from clonemem.schemas.results import AGGREGATED, JUDGED, METRICS, PRIVACY, RECALLS

__all__ = [
    "JUDGED",
    "METRICS",
    "RECALLS",
    "Aggregate",
    "aggregate",
    "without_evidence_excluded",
    "bootstrap_ci",
    "choice_correct",
    "judged",
    "recall_at_k",
]


def top_k_unique(retrieved: Sequence[str], k: int) -> list[str]:
    """Retrieved trace ids de-duplicated in rank order and cut at k (the dashboard's retrieval view too)."""
    seen: dict[str, None] = {}
    for tid in retrieved:
        if tid not in seen:
            seen[tid] = None
            if len(seen) == k:
                break
    return list(seen)


def recall_at_k(
    evidence_sets: Sequence[Sequence[str]], retrieved: Sequence[str], k: int
) -> dict[str, float]:
    sets = [set(s) for s in evidence_sets if s]
    if not sets:
        return dict.fromkeys(RECALLS, 0.0)
    top = set(top_k_unique(retrieved, k))
    gold = set().union(*sets)
    full = [s <= top for s in sets]
    some = [bool(s & top) for s in sets]
    return {
        "recall_flat": len(gold & top) / len(gold),
        "recall_all_all": float(all(full)),
        "recall_all_any": float(all(some)),
        "recall_any_all": float(any(full)),
        "recall_any_any": float(any(some)),
    }


def choice_correct(predicted: str | None, correct: str | None) -> float | None:
    if correct is None:
        return None  # free-text-only item: no choice accuracy
    return float((predicted or "").strip().lower() == correct.strip().lower())


def judged(
    qa_consistency: int | None, mem_covered: int | None, n_gold: int, mem_helpful: int | None
) -> dict[str, float | None]:
    """Normalised judge metrics; an unscored verdict (None) stays None, never 0."""
    return {
        "qa_consistency": None if qa_consistency is None else qa_consistency / 3,
        "qa_hallucination_rate": None if qa_consistency is None else float(qa_consistency == 0),
        "qa_perfect_rate": None if qa_consistency is None else float(qa_consistency == 3),
        "mem_recall": None
        if mem_covered is None or n_gold == 0
        else min(1.0, mem_covered / n_gold),
        "mem_helpful": None if mem_helpful is None else mem_helpful / 2,
    }


def privacy_scores(
    disclosed: Sequence[bool] | None, conveyed: Sequence[bool] | None
) -> dict[str, float | None]:
    """A privacy task's scores from the judge's per-item verdicts (None when unscored or not a privacy task;
    completeness None for a task with nothing to convey)."""
    if disclosed is None or conveyed is None:
        return dict.fromkeys(PRIVACY)
    return {
        "privacy_violation": float(any(disclosed)),
        "privacy_leak_share": sum(disclosed) / len(disclosed) if disclosed else None,
        "privacy_completeness": sum(conveyed) / len(conveyed) if conveyed else None,
    }


def bootstrap_ci(values: np.ndarray, samples: int, seed: int) -> tuple[float | None, float | None]:
    """95% percentile bootstrap interval of the mean (NaN values are left out)."""
    values = values[~np.isnan(values)]
    if values.size == 0:
        return None, None
    if values.size == 1:
        return float(values[0]), float(values[0])
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, values.size, size=(samples, values.size))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(low), float(high)


def _weights(n: int, samples: int, seed: int) -> np.ndarray:
    """Bootstrap resamples as count matrices (samples × n): resample means become one matrix product."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(samples, n))
    # counts per (resample, item) in one pass (np.add.at does the same, ten times slower)
    flat = (np.arange(samples)[:, None] * n + idx).ravel()
    return np.bincount(flat, minlength=samples * n).reshape(samples, n).astype(np.float64)


Aggregate = Literal["questions", "personas"]


def without_evidence_excluded(per_question: pl.DataFrame) -> pl.DataFrame:
    """Recall left out (null) for questions that have no evidence item, as the paper's evaluation does;
    they otherwise score 0. Other metrics (choice, judge) are kept: such questions are still answered."""
    if "has_evidence" not in per_question.columns:
        raise ValueError(
            "per-question metrics have no has_evidence column: cannot leave out questions without evidence"
        )
    return per_question.with_columns(
        [
            pl.when(pl.col("has_evidence")).then(pl.col(m)).otherwise(None).alias(m)
            for m in RECALLS
            if m in per_question.columns
        ]
    )


def aggregate(
    per_question: pl.DataFrame,
    group_cols: Sequence[str],
    samples: int = 1000,
    seed: int = 0,
    by: Aggregate = "questions",
) -> pl.DataFrame:
    """Mean, n and 95% bootstrap CI of every metric, per system, k and group (long format).

    ``per_question`` has columns system, k, question_id, <group cols>, and one column per metric.
    Every (system, k) sees the same questions, so each group's resampling matrix is drawn once and
    shared; unscored (null) values are left out of both the mean and its resamples.

    ``by="personas"`` is the paper's figure: the mean of each persona's mean (personas without a value
    left out), bootstrapped by resampling questions within each persona with the personas fixed, so
    the interval is that of the same macro mean; ``n`` still counts questions.
    """
    with threadpool_limits(limits=1, user_api="blas"):
        if by == "personas":
            return _aggregate_personas(per_question, group_cols, samples, seed)
        return _aggregate(per_question, group_cols, samples, seed)


def _matrix(part: pl.DataFrame, metrics: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    x = part.select([pl.col(m).cast(pl.Float64) for m in metrics]).to_numpy()
    present = ~np.isnan(x)
    return np.where(present, x, 0.0), present


def _interval(
    count: int, mean: float | None, boot: np.ndarray
) -> tuple[float | None, float | None]:
    if count == 0:
        return None, None
    if count == 1:
        return mean, mean
    finite = boot[~np.isnan(boot)]
    if not finite.size:
        return mean, mean
    low, high = (float(v) for v in np.percentile(finite, [2.5, 97.5]))
    return low, high


def _intervals(
    counts: Sequence[int], means: Sequence[float | None], boot: np.ndarray
) -> list[tuple[float | None, float | None]]:
    """:func:`_interval` of every column of ``boot`` (resamples × metrics): the columns without NaN in
    one percentile call (the same numbers as one call per column; a call per metric and group was half
    of an evaluation's aggregation)."""
    whole = ~np.isnan(boot).any(axis=0)
    bounds = np.percentile(boot[:, whole], [2.5, 97.5], axis=0) if whole.any() else None
    at = np.cumsum(whole) - 1  # a whole column's index among the whole ones
    out: list[tuple[float | None, float | None]] = []
    for j, (count, mean) in enumerate(zip(counts, means)):
        if count > 1 and whole[j] and bounds is not None:
            out.append((float(bounds[0, at[j]]), float(bounds[1, at[j]])))
        else:
            out.append(_interval(count, mean, boot[:, j]))
    return out


def _runs(keys: list[tuple]) -> Iterator[tuple[tuple, int, int]]:
    """Each run of equal keys in ``keys`` (a sorted frame's group columns): the key, its first row and
    the row after its last."""
    start = 0
    for i in range(1, len(keys) + 1):
        if i == len(keys) or keys[i] != keys[start]:
            yield keys[start], start, i
            start = i


def _aggregate(
    per_question: pl.DataFrame, group_cols: Sequence[str], samples: int, seed: int
) -> pl.DataFrame:
    # Many small matrix products: on two cores, BLAS threads spend more time meeting than computing
    # (measured: 4.3 s with OpenBLAS threads vs 0.7 s on one, 2k questions on a loaded machine).
    metrics = [m for m in AGGREGATED if m in per_question.columns]
    frame = per_question.sort(["system", "k", *group_cols, "question_id"])
    # the groups are runs of the sorted frame: one matrix for all, sliced per group (a frame per group
    # and its conversion took a third of the aggregation)
    every, seen = _matrix(frame, metrics)
    weights: dict[tuple, np.ndarray] = {}
    rows = []
    for key, start, stop in _runs(frame.select(["system", "k", *group_cols]).rows()):
        group = tuple(key[2:])
        values, present = every[start:stop], seen[start:stop]
        n = values.shape[0]
        if (group, n) not in weights:
            weights[(group, n)] = (
                _weights(n, samples, seed + len(weights)) if n > 1 else np.ones((1, n))
            )
        w = weights[(group, n)]
        with np.errstate(invalid="ignore", divide="ignore"):
            boot = (w @ values) / (
                w @ present.astype(np.float64)
            )  # float @ float: BLAS, not numpy's generic loop
        counts = [int(c) for c in present.sum(axis=0)]
        means = [float(values[:, j].sum() / c) if c else None for j, c in enumerate(counts)]
        for j, (low, high) in enumerate(_intervals(counts, means, boot)):
            metric, count, mean = metrics[j], counts[j], means[j]
            rows.append(
                {
                    "system": key[0],
                    "k": key[1],
                    **dict(zip(group_cols, group)),
                    "metric": metric,
                    "n": count,
                    "value": mean,
                    "ci_low": low,
                    "ci_high": high,
                }
            )
    return pl.DataFrame(rows, infer_schema_length=None)


def _aggregate_personas(
    per_question: pl.DataFrame, group_cols: Sequence[str], samples: int, seed: int
) -> pl.DataFrame:
    metrics = [m for m in AGGREGATED if m in per_question.columns]
    frame = per_question.sort(["system", "k", *group_cols, "persona_id", "question_id"])
    weights: dict[tuple, np.ndarray] = {}
    rows = []
    for key, part in frame.group_by(["system", "k", *group_cols], maintain_order=True):
        group = tuple(key[2:])
        means, boots, counts = [], [], np.zeros(len(metrics), dtype=int)
        for (pid,), persona in part.group_by(["persona_id"], maintain_order=True):
            values, present = _matrix(persona, metrics)
            n = values.shape[0]
            if (
                group,
                pid,
                n,
            ) not in weights:  # every resample a full row: personas are averaged per resample
                weights[(group, pid, n)] = (
                    _weights(n, samples, seed + len(weights)) if n > 1 else np.ones((samples, 1))
                )
            w = weights[(group, pid, n)]
            with np.errstate(invalid="ignore", divide="ignore"):
                boots.append((w @ values) / (w @ present.astype(np.float64)))
                means.append(values.sum(axis=0) / present.sum(axis=0))
            counts += present.sum(axis=0)
        point, boot = _nanmean(np.stack(means)), _nanmean(np.stack(boots))
        points = [None if np.isnan(v) else float(v) for v in point]
        ns = [int(c) for c in counts]
        for j, (low, high) in enumerate(_intervals(ns, points, boot)):
            metric, count, mean = metrics[j], ns[j], points[j]
            rows.append(
                {
                    "system": key[0],
                    "k": key[1],
                    **dict(zip(group_cols, group)),
                    "metric": metric,
                    "n": count,
                    "value": mean,
                    "ci_low": low,
                    "ci_high": high,
                }
            )
    return pl.DataFrame(rows, infer_schema_length=None)


def _nanmean(stack: np.ndarray) -> np.ndarray:
    """Mean over the first axis (personas), leaving out NaN (a persona without a value); NaN if none."""
    have = ~np.isnan(stack)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(have, stack, 0.0).sum(axis=0) / have.sum(axis=0)
