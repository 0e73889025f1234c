"""Metrics speed (issue: evaluation): 1,000 questions × 6 systems × 3 k values — per-question recall
variants, choice accuracy and judge normalisation, then aggregation per system, k, persona, question
type and dimension with 95% bootstrap CIs (1,000 resamples). Prints JSON.

    python benchmarks/metrics_speed.py
"""

from __future__ import annotations

import json
import random
import time

import polars as pl

from clonemem.evaluation import metrics as M

TYPES = [
    "single_point_factual",
    "comparison",
    "trajectory",
    "pattern",
    "causal",
    "counterfactual",
    "inferential",
    "unanswerable",
]


def synthetic(n_questions: int, systems: list[str], ks: list[int], seed: int = 1) -> list[dict]:
    rng = random.Random(seed)
    traces = [f"t{i}" for i in range(5000)]
    questions = []
    for q in range(n_questions):
        sets = [rng.sample(traces, rng.randint(1, 3)) for _ in range(rng.randint(1, 4))]
        questions.append(
            (
                f"q{q}",
                sets,
                rng.choice("ABCDE"),
                TYPES[q % 8],
                ["experience", "emotion", "opinion"][q % 3],
                f"p{q % 10}",
            )
        )
    runs = []
    for system in systems:
        for qid, sets, correct, qtype, dim, persona in questions:
            gold = [t for s in sets for t in s]
            retrieved = [
                rng.choice(gold) if rng.random() < 0.3 else rng.choice(traces)
                for _ in range(max(ks) + 5)
            ]
            runs.append(
                (
                    system,
                    qid,
                    sets,
                    retrieved,
                    correct,
                    rng.choice("ABCDE"),
                    qtype,
                    dim,
                    persona,
                    rng.choice([0, 1, 2, 3, None]),
                    rng.randint(0, len(sets)),
                    rng.choice([0, 1, 2]),
                )
            )
    return runs


def main() -> None:
    systems, ks = [f"system{i}" for i in range(6)], [5, 10, 20]
    runs = synthetic(1000, systems, ks)
    t0 = time.perf_counter()
    rows = []
    for (
        system,
        qid,
        sets,
        retrieved,
        correct,
        predicted,
        qtype,
        dim,
        persona,
        qa,
        covered,
        helpful,
    ) in runs:
        for k in ks:
            rows.append(
                {
                    "system": system,
                    "k": k,
                    "question_id": qid,
                    "persona_id": persona,
                    "question_type": qtype,
                    "dimension": dim,
                    **M.recall_at_k(sets, retrieved, k),
                    "choice_accuracy": M.choice_correct(predicted, correct),
                    **M.judged(qa, covered, len(sets), helpful),
                }
            )
    frame = pl.DataFrame(rows, infer_schema_length=None)
    t1 = time.perf_counter()
    aggregates = {
        g: M.aggregate(frame, cols, 1000, 0)
        for g, cols in (
            ("all", []),
            ("persona", ["persona_id"]),
            ("question_type", ["question_type"]),
            ("dimension", ["dimension"]),
        )
    }
    t2 = time.perf_counter()
    print(
        json.dumps(
            {
                "benchmark": "metrics_speed",
                "questions": 1000,
                "systems": len(systems),
                "k_values": ks,
                "per_question_rows": frame.height,
                "aggregate_rows": sum(a.height for a in aggregates.values()),
                "bootstrap_resamples": 1000,
                "per_question_seconds": round(t1 - t0, 3),
                "aggregate_seconds": round(t2 - t1, 3),
                "total_seconds": round(t2 - t0, 3),
                "target_seconds": 2.0,
                "meets_target": (t2 - t0) < 2.0,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
