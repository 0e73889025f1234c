"""The `evaluate --json` contract is written out, not generated: its models hold exactly the metric list."""

from __future__ import annotations

from clonemem.schemas.results import (
    EFFICIENCY,
    METRICS,
    PRIVACY,
    PrivacyScores,
    Scores,
    SystemScores,
    TypeScores,
)


def test_scores_hold_every_metric_with_its_interval_and_nothing_else() -> None:
    metric_fields = set(Scores.model_fields) - {"system", "k", "n_questions"}
    assert metric_fields == {*METRICS, *(f"{m}_ci" for m in METRICS)}


def test_system_scores_add_efficiency_the_diagnosis_and_privacy() -> None:
    assert set(SystemScores.model_fields) - set(Scores.model_fields) == {
        *EFFICIENCY,
        "diagnosis",
        "privacy",
    }
    assert set(TypeScores.model_fields) - set(Scores.model_fields) == {
        "question_type",
        "diagnosis",
        "privacy",
    }
    assert set(PrivacyScores.model_fields) == {*PRIVACY, "n", "ci"}
