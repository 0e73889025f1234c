"""Pure computations on query results: confidence intervals, the superficial-cue table, retrieval ranks
at k. No SQL and no rendering here, so each is testable on plain frames."""

from __future__ import annotations

import json
import math

import polars as pl

from clonemem.evaluation.metrics import top_k_unique
from clonemem.qa.cues import tally_cues

CHANCE = 0.25  # four options A–D (the abstention E is excluded from the cue statistics)
LETTERS = ("A", "B", "C", "D")


def wilson(successes: float, n: int, z: float = 1.959964) -> tuple[float | None, float | None]:
    """Wilson score 95% interval of a proportion (``successes`` may be fractional: tie credits)."""
    if n <= 0:
        return None, None
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def _verdict(lo: float | None, hi: float | None, chance: float) -> str:
    if lo is None or hi is None:
        return "no items"
    if lo > chance:
        return "above chance"
    if hi < chance:
        return "below chance"
    return "consistent with chance"


def cue_table(items: pl.DataFrame) -> pl.DataFrame:
    """How often the longest option, and the option sharing most content words with the question, is the
    correct one (items whose answer is among A–D; a tie earns 1/ties), with Wilson 95% intervals against
    chance (1/4). ``items`` has question, correct_choice_id and the ordered option list (``cue_items``)."""
    cues = tally_cues(
        (row["question"], row["correct_choice_id"], row["choices"] or [])
        for row in items.iter_rows(named=True)
    )
    n = cues.items
    rows = []
    for cue, hits in (("longest option", cues.longest), ("question-word overlap", cues.overlap)):
        lo, hi = wilson(hits, n)
        rows.append(
            {
                "cue": cue,
                "items": n,
                "accuracy": hits / n if n else None,
                "ci_low": lo,
                "ci_high": hi,
                "chance": CHANCE,
                "verdict": _verdict(lo, hi, CHANCE),
            }
        )
    return pl.DataFrame(
        rows,
        schema={
            "cue": pl.Utf8,
            "items": pl.Int64,
            "accuracy": pl.Float64,
            "ci_low": pl.Float64,
            "ci_high": pl.Float64,
            "chance": pl.Float64,
            "verdict": pl.Utf8,
        },
    )


def letter_table(items: pl.DataFrame) -> pl.DataFrame:
    """Position cue: the share of A–D answers on each letter, with Wilson 95% intervals against 1/4."""
    letters = (
        [c for c in items["correct_choice_id"].to_list() if c in LETTERS] if items.height else []
    )
    n = len(letters)
    rows = []
    for letter in LETTERS:
        hits = letters.count(letter)
        lo, hi = wilson(hits, n)
        rows.append(
            {
                "letter": letter,
                "items": hits,
                "share": hits / n if n else None,
                "ci_low": lo,
                "ci_high": hi,
                "chance": CHANCE,
                "verdict": _verdict(lo, hi, CHANCE),
            }
        )
    return pl.DataFrame(
        rows,
        schema={
            "letter": pl.Utf8,
            "items": pl.Int64,
            "share": pl.Float64,
            "ci_low": pl.Float64,
            "ci_high": pl.Float64,
            "chance": pl.Float64,
            "verdict": pl.Utf8,
        },
    )


def ranked_at_k(retrieved_json: str, k: int) -> list[str]:
    """Retrieved trace ids (a JSON list) de-duplicated in rank order and cut at k, exactly as the recall
    metrics count them."""
    return top_k_unique(json.loads(retrieved_json or "[]"), k)


def retrieval_table(retrievals: pl.DataFrame, gold: set[str], k: int) -> pl.DataFrame:
    """One row per (system, rank ≤ k) with the trace id and whether it is gold."""
    rows = [
        {"system": r["system"], "rank": i + 1, "trace_id": tid, "gold": tid in gold}
        for r in retrievals.iter_rows(named=True)
        for i, tid in enumerate(ranked_at_k(r["retrieved"], k))
    ]
    return pl.DataFrame(
        rows, schema={"system": pl.Utf8, "rank": pl.Int64, "trace_id": pl.Utf8, "gold": pl.Boolean}
    )


def retrieval_summary(table: pl.DataFrame, systems: list[str], gold: set[str]) -> pl.DataFrame:
    """Per system: gold traces found at k out of all gold traces (recall_flat@k of this one question)."""
    rows = []
    for s in systems:
        found = (
            set(table.filter((pl.col("system") == s) & pl.col("gold"))["trace_id"].to_list())
            if table.height
            else set()
        )
        rows.append(
            {
                "system": s,
                "gold_found": len(found),
                "gold_total": len(gold),
                "recall_flat": len(found) / len(gold) if gold else None,
            }
        )
    return pl.DataFrame(
        rows,
        schema={
            "system": pl.Utf8,
            "gold_found": pl.Int64,
            "gold_total": pl.Int64,
            "recall_flat": pl.Float64,
        },
    )


def funnel_long(funnel: pl.DataFrame) -> pl.DataFrame:
    """The QC funnel summed over types and dimensions, one row per stage in order (for the funnel chart)."""
    stages = [
        "planned",
        "written",
        "rejected_format",
        "rejected_sufficiency",
        "rejected_distractors",
        "accepted",
    ]
    totals = {s: int(funnel[s].sum()) if funnel.height else 0 for s in stages}
    return pl.DataFrame(
        {"stage": stages, "order": list(range(len(stages))), "items": [totals[s] for s in stages]}
    )


def flatten_summary(summary: str | None) -> dict[str, object]:
    """Top-level scalar fields of a run's JSON summary (nested objects as compact JSON text)."""
    if not summary:
        return {}
    try:
        doc = json.loads(summary)
    except ValueError:
        return {}
    if not isinstance(doc, dict):
        return {}
    return {
        k: (json.dumps(v, ensure_ascii=False) if isinstance(v, (dict, list)) else v)
        for k, v in doc.items()
    }


def first_different(identities: pl.DataFrame, chosen: str, candidates: list[str]) -> str:
    """The first of ``candidates`` (newest first) that is not a copy of ``chosen``: another provenance or
    other stored figures (``eval_identities`` rows); the first candidate when every one is a copy."""
    ident = {
        r["eval_run_id"]: (r["provenance_json"], r["figures"])
        for r in identities.iter_rows(named=True)
    }
    return next((c for c in candidates if ident.get(c) != ident.get(chosen)), candidates[0])


def privacy_points(overall: pl.DataFrame) -> pl.DataFrame:
    """Per system and k, the privacy violation rate against completeness with both 95% intervals (one
    point per system of LifeSide's Fig. 5 view), from an evaluation's overall metrics; empty without
    privacy tasks."""
    names = {"privacy_violation": "violation", "privacy_completeness": "completeness"}
    part = overall.filter(pl.col("metric").is_in(list(names)) & pl.col("value").is_not_null())
    if part.height == 0:
        return pl.DataFrame(
            schema={
                "system": pl.Utf8,
                "k": pl.Int64,
                "violation": pl.Float64,
                "violation_low": pl.Float64,
                "violation_high": pl.Float64,
                "completeness": pl.Float64,
                "completeness_low": pl.Float64,
                "completeness_high": pl.Float64,
                "tasks": pl.Int64,
            }
        )
    sides = []
    for metric, name in names.items():
        sides.append(
            part.filter(pl.col("metric") == metric).select(
                "system",
                pl.col("k").cast(pl.Int64),
                pl.col("value").alias(name),
                pl.col("ci_low").alias(f"{name}_low"),
                pl.col("ci_high").alias(f"{name}_high"),
                pl.col("n").cast(pl.Int64).alias(f"n_{name}"),
            )
        )
    joined = sides[0].join(sides[1], on=["system", "k"], how="inner")
    return joined.rename({"n_violation": "tasks"}).drop("n_completeness").sort("k", "system")


def evaluation_labels(evaluations: pl.DataFrame) -> pl.DataFrame:
    """Each evaluation (``eval_run_id``, ``started_at``; any order) with its place in time and a label that
    tells evaluations minutes apart: ``evaluation`` = "3 · 11-27 15:42:07" (oldest is 1)."""
    ordered = (
        evaluations.select("eval_run_id", "started_at").unique().sort("started_at", "eval_run_id")
    )
    return ordered.with_columns(order=pl.int_range(1, ordered.height + 1)).with_columns(
        evaluation=pl.format(
            "{} · {}", pl.col("order"), pl.col("started_at").dt.strftime("%m-%d %H:%M:%S")
        )
    )
