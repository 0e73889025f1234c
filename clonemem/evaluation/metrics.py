"""The CloneMem metrics (SPEC §5, paper D.1), exactly as specified, and their aggregation.

Per question, each evidence item's trace-id list is one evidence set; retrieved trace ids are
de-duplicated in rank order and cut at K. Evidence items without ids are skipped; a question with
no (non-empty) evidence set scores 0 on every recall variant.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

RECALLS = ("recall_flat", "recall_all_all", "recall_all_any", "recall_any_all", "recall_any_any")
JUDGED = ("qa_consistency", "qa_hallucination_rate", "qa_perfect_rate", "mem_recall", "mem_helpful")
METRICS = (*RECALLS, "choice_accuracy", *JUDGED)


def top_k_unique(retrieved: Sequence[str], k: int) -> list[str]:
    seen: dict[str, None] = {}
    for tid in retrieved:
        if tid not in seen:
            seen[tid] = None
            if len(seen) == k:
                break
    return list(seen)


def recall_at_k(evidence_sets: Sequence[Sequence[str]], retrieved: Sequence[str], k: int) -> dict[str, float]:
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


def judged(qa_consistency: int | None, mem_covered: int | None, n_gold: int, mem_helpful: int | None) -> dict[str, float | None]:
    """Normalised judge metrics; an unscored verdict (None) stays None, never 0."""
    return {
        "qa_consistency": None if qa_consistency is None else qa_consistency / 3,
        "qa_hallucination_rate": None if qa_consistency is None else float(qa_consistency == 0),
        "qa_perfect_rate": None if qa_consistency is None else float(qa_consistency == 3),
        "mem_recall": None if mem_covered is None or n_gold == 0 else min(1.0, mem_covered / n_gold),
        "mem_helpful": None if mem_helpful is None else mem_helpful / 2,
    }


def bootstrap_ci(values: np.ndarray, samples: int, seed: int) -> tuple[float | None, float | None]:
    """95% percentile bootstrap interval of the mean."""
    values = values[~np.isnan(values)]
    if values.size == 0:
        return None, None
    if values.size == 1:
        return float(values[0]), float(values[0])
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, values.size, size=(samples, values.size))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(low), float(high)


def aggregate(per_question: pl.DataFrame, group_cols: Sequence[str], samples: int = 1000, seed: int = 0) -> pl.DataFrame:
    """Mean, n and 95% bootstrap CI of every metric, per system, k and group (long format).

    ``per_question`` has columns system, k, question_id, <group cols>, and one column per metric.
    """
    rows = []
    keys = ["system", "k", *group_cols]
    for key, frame in per_question.group_by(keys, maintain_order=True):
        for metric in METRICS:
            if metric not in frame.columns:
                continue
            values = frame[metric].cast(pl.Float64).to_numpy()
            valid = values[~np.isnan(values)]
            low, high = bootstrap_ci(values, samples, seed)
            rows.append({**dict(zip(keys, key)), "metric": metric, "n": int(valid.size),
                         "value": float(valid.mean()) if valid.size else None, "ci_low": low, "ci_high": high})
    return pl.DataFrame(rows, infer_schema_length=None)
