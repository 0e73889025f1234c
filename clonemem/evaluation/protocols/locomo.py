"""LoCoMo's own QA scoring (Maharana et al., ACL 2024; ``task_eval/evaluation.py`` of its
repository), rule for rule:

- categories 2 (temporal) and 4 (single-hop): F1 over normalised, Porter-stemmed tokens counted with
  multiplicity (:func:`~clonemem.evaluation.protocols.text.locomo_tokens`);
- category 1 (multi-hop): answer and prediction are split on commas; the mean, over the answer's
  parts, of the best F1 against any of the prediction's parts;
- category 3 (open-domain): only the answer's part before the first ``;`` is scored, as category 2;
- category 5 (adversarial): 1 exactly when the prediction contains "no information available" or
  "not mentioned" (any case), else 0;
- a question without a LoCoMo category (another benchmark scored by this protocol) is scored as
  category 4.

Reported per category (by name, with its number), ``overall`` over categories 1–4 (as the papers
report) and ``overall_with_adversarial`` over all five.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from clonemem.evaluation.protocols.base import (
    Granularity,
    Group,
    Prediction,
    Protocol,
    ProtocolQuestion,
    QuestionScore,
    Scope,
)
from clonemem.evaluation.protocols.text import bag_f1, locomo_tokens

CATEGORY_NAMES = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}
ADVERSARIAL = 5
ABSTAINS = ("no information available", "not mentioned")
NO_ANSWER = "no prediction for this question"


def f1_single(prediction: str, answer: str) -> float:
    """LoCoMo's token F1 of one prediction against one answer."""
    return bag_f1(locomo_tokens(prediction), locomo_tokens(answer))


def f1_multi(prediction: str, answer: str) -> float:
    """Category 1: the answer's comma-separated parts, each matched with the best prediction's."""
    predictions = [p.strip() for p in prediction.split(",")]
    answers = [a.strip() for a in answer.split(",")]
    return sum(max(f1_single(p, a) for p in predictions) for a in answers) / len(answers)


def adversarial(prediction: str) -> float:
    said = prediction.lower()
    return float(any(phrase in said for phrase in ABSTAINS))


def locomo_f1(category: int | None, prediction: str, answer: str) -> float:
    """One question's score under LoCoMo's rules for its category."""
    if category == ADVERSARIAL:
        return adversarial(prediction)
    if category == 1:
        return f1_multi(prediction, answer)
    if category == 3:
        answer = answer.split(";")[0].strip()
    return f1_single(prediction, answer)


def category_group(category: int | None) -> list[Group]:
    return [Group(CATEGORY_NAMES[category], category)] if category in CATEGORY_NAMES else []


class LocomoProtocol(Protocol):
    name: ClassVar[str] = "locomo"
    version: ClassVar[str] = "1"
    metrics: ClassVar[tuple[str, ...]] = ("f1",)
    answer_style: ClassVar[str | None] = "locomo"

    def score(self, q: ProtocolQuestion, p: Prediction, scope: Scope) -> list[QuestionScore]:
        if p.answer is None:
            return [QuestionScore("qa", None, "f1", None, NO_ANSWER)]
        return [QuestionScore("qa", None, "f1", locomo_f1(q.category, p.answer, q.answer))]

    def groups(self, q: ProtocolQuestion, granularity: Granularity) -> Sequence[Group]:
        overall = [] if q.category == ADVERSARIAL else [Group("overall")]
        return [*category_group(q.category), *overall, Group("overall_with_adversarial")]
