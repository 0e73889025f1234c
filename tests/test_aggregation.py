"""How per-question metrics become one figure: over questions (the default) or the paper's mean of
persona means, with or without questions that have no evidence; and the published checkpoint's
figures reproduced from its ranked lists with the project's own metric code."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from clonemem.evaluation import metrics as M
from clonemem.evaluation import report
from clonemem.schemas.config import EvaluationConfig

CHECKPOINT = Path(__file__).parent / "fixtures" / "xmemory_checkpoint" / "guilin_chen_hybrid.json"


def _frame(rows: list[dict]) -> pl.DataFrame:
    base = {"system": "s", "question_type": "t", "dimension": "d"}
    return pl.DataFrame([{**base, **r} for r in rows], infer_schema_length=None)


def _value(aggs: dict[str, pl.DataFrame], metric: str, k: int = 10) -> float:
    row = aggs["all"].filter((pl.col("metric") == metric) & (pl.col("k") == k)).row(0, named=True)
    return row["value"]


def test_published_checkpoint_recall_is_reproduced_with_the_papers_aggregation() -> None:
    data = json.loads(CHECKPOINT.read_text())
    assert len(data["questions"]) == 32
    rows = [
        {
            "k": k,
            "question_id": q["question_id"],
            "persona_id": data["persona_id"],
            "has_evidence": bool(q["evidence"]),
            **M.recall_at_k(q["evidence"], q["ranked"], k),
        }
        for q in data["questions"]
        for k in (10, 20)
    ]
    aggs = report.aggregates(
        _frame(rows), samples=200, seed=0, by="personas", exclude_no_evidence=True
    )
    # the stored figures of the checkpoint (recall_metrics/recall_metrics_Guilin Chen_..._hybrid.json)
    assert _value(aggs, "recall_flat", 10) == pytest.approx(0.06431277056277057, abs=1e-15)
    assert _value(aggs, "recall_any_any", 10) == 0.21875
    assert _value(aggs, "recall_flat", 20) == pytest.approx(0.07056277056277056, abs=1e-15)
    assert _value(aggs, "recall_any_any", 20) == 0.25
    # ... to the precision the paper prints
    assert [
        round(_value(aggs, m, k), 4) for k in (10, 20) for m in ("recall_flat", "recall_any_any")
    ] == [0.0643, 0.2188, 0.0706, 0.25]


# Two personas of different sizes: p1 answers its only question fully; p2 has recall 0.5 and 0 on two
# questions with evidence and one question without evidence (recall 0 by definition).
ROWS = [
    {
        "k": 10,
        "question_id": "q1",
        "persona_id": "p1",
        "has_evidence": True,
        "recall_flat": 1.0,
        "choice_accuracy": 1.0,
    },
    {
        "k": 10,
        "question_id": "q2",
        "persona_id": "p2",
        "has_evidence": True,
        "recall_flat": 0.5,
        "choice_accuracy": 0.0,
    },
    {
        "k": 10,
        "question_id": "q3",
        "persona_id": "p2",
        "has_evidence": True,
        "recall_flat": 0.0,
        "choice_accuracy": 1.0,
    },
    {
        "k": 10,
        "question_id": "q4",
        "persona_id": "p2",
        "has_evidence": False,
        "recall_flat": 0.0,
        "choice_accuracy": 0.0,
    },
]


@pytest.mark.parametrize(
    ("by", "exclude", "expected", "n"),
    [
        ("questions", False, 1.5 / 4, 4),  # today's default: every question, no-evidence scored 0
        ("questions", True, 1.5 / 3, 3),
        ("personas", False, (1.0 + 0.5 / 3) / 2, 4),
        ("personas", True, (1.0 + 0.25) / 2, 3),  # the paper's figure
    ],
)
def test_each_aggregation_gives_its_own_figure(
    by: str, exclude: bool, expected: float, n: int
) -> None:
    aggs = report.aggregates(_frame(ROWS), samples=300, seed=7, by=by, exclude_no_evidence=exclude)  # type: ignore[arg-type]
    row = aggs["all"].filter(pl.col("metric") == "recall_flat").row(0, named=True)
    assert row["value"] == pytest.approx(expected)
    assert row["n"] == n
    assert row["ci_low"] <= row["value"] <= row["ci_high"]
    # leaving out questions without evidence concerns recall only: they are still answered
    choice = aggs["all"].filter(pl.col("metric") == "choice_accuracy").row(0, named=True)
    assert choice["n"] == 4
    assert choice["value"] == pytest.approx(0.5 if by == "questions" else (1.0 + 1 / 3) / 2)
    again = report.aggregates(_frame(ROWS), samples=300, seed=7, by=by, exclude_no_evidence=exclude)  # type: ignore[arg-type]
    assert again["all"].equals(aggs["all"])  # deterministic intervals


def test_persona_mean_bootstrap_keeps_personas_and_resamples_their_questions() -> None:
    """With the personas fixed, a persona with a single question contributes its value to every resample:
    the macro interval's spread comes from p2's questions only, so it is half p2's own spread."""
    aggs = report.aggregates(_frame(ROWS), samples=2000, seed=1, by="personas")
    macro = aggs["all"].filter(pl.col("metric") == "recall_flat").row(0, named=True)
    p2 = (
        aggs["persona"]
        .filter((pl.col("metric") == "recall_flat") & (pl.col("persona_id") == "p2"))
        .row(0, named=True)
    )
    assert macro["ci_high"] - macro["ci_low"] == pytest.approx(
        (p2["ci_high"] - p2["ci_low"]) / 2, rel=0.2
    )
    assert macro["ci_low"] >= 0.5  # p1's 1.0 is always in: the mean never falls below (1 + 0) / 2


def test_default_aggregation_is_unchanged_and_needs_no_evidence_column() -> None:
    frame = _frame(ROWS).drop("has_evidence")
    assert report.aggregates(frame, samples=100, seed=0)["all"].equals(
        report.aggregates(frame, samples=100, seed=0, by="questions", exclude_no_evidence=False)[
            "all"
        ]
    )
    with pytest.raises(ValueError, match="has_evidence"):
        report.aggregates(frame, samples=100, seed=0, exclude_no_evidence=True)


def test_config_names_the_aggregation_and_refuses_others() -> None:
    assert (
        EvaluationConfig().aggregate == "questions"
        and EvaluationConfig().exclude_no_evidence is False
    )
    assert EvaluationConfig(aggregate="personas", exclude_no_evidence=True).aggregate == "personas"
    with pytest.raises(ValueError, match="aggregate"):
        EvaluationConfig(aggregate="macro")
