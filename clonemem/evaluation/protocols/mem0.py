"""LoCoMo as A-Mem, Mem0, MemoryOS and O-Mem report it ("F1", "B1" and the judge's "J"; mem0's
``evaluation/metrics/utils.py`` and ``llm_judge.py``):

- F1 over the *sets* of lower-cased tokens after ``. , ! ?`` become spaces (no stemming, no stop
  words);
- BLEU-1: NLTK's ``sentence_bleu`` with weights (1, 0, 0, 0) and smoothing method 1 over word tokens
  of the lower-cased texts (see :mod:`clonemem.evaluation.protocols.text` on tokenizing without
  Punkt data);
- an empty prediction or answer scores 0 on both;
- J: a generous judge's CORRECT/WRONG label (the ``protocol.mem0_judge`` stage), CORRECT scoring 1;
- category 5 (adversarial) is left out of all three, as those papers do.

Reported per category 1–4 (by name, with its number) and ``overall`` over them.
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
from clonemem.evaluation.protocols.locomo import ADVERSARIAL, NO_ANSWER, category_group
from clonemem.evaluation.protocols.text import bleu1, mem0_tokens, set_f1

UNJUDGED = "the judge's reply could not be read"


def mem0_f1(prediction: str, answer: str) -> float:
    if not prediction or not answer:
        return 0.0
    return set_f1(mem0_tokens(prediction.strip()), mem0_tokens(answer.strip()))


def mem0_bleu1(prediction: str, answer: str) -> float:
    if not prediction or not answer:
        return 0.0
    return bleu1(prediction.strip(), answer.strip())


class Mem0Protocol(Protocol):
    name: ClassVar[str] = "mem0"
    version: ClassVar[str] = "1"
    metrics: ClassVar[tuple[str, ...]] = ("f1", "bleu1", "judge")
    answer_style: ClassVar[str | None] = "locomo"
    judge: ClassVar[str | None] = "mem0"

    def applies(self, q: ProtocolQuestion) -> bool:
        return q.category != ADVERSARIAL

    def score(self, q: ProtocolQuestion, p: Prediction, scope: Scope) -> list[QuestionScore]:
        if p.answer is None:
            return [QuestionScore("qa", None, m, None, NO_ANSWER) for m in self.metrics]
        label = p.judged.get(self.name)
        return [
            QuestionScore("qa", None, "f1", mem0_f1(p.answer, q.answer)),
            QuestionScore("qa", None, "bleu1", mem0_bleu1(p.answer, q.answer)),
            QuestionScore(
                "qa",
                None,
                "judge",
                None if label is None else float(label),
                UNJUDGED if label is None else None,
            ),
        ]

    def groups(self, q: ProtocolQuestion, granularity: Granularity) -> Sequence[Group]:
        return [*category_group(q.category), Group("overall")]


def label_correct(label: str) -> bool:
    """mem0's reading of the judge: exactly ``CORRECT`` scores 1."""
    return label == "CORRECT"
