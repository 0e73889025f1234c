"""PersonaMem's scoring (Jiang et al., 2025): multiple-choice accuracy, overall and per question
type.

The pick is the answerer's option id, or, for a prediction given as text, the option letter it names
("(c)", "c", "Option C"); ids compare without parentheses and case, so "(c)" equals "c".
"""

from __future__ import annotations

import re
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

_LETTER = re.compile(
    r"^\s*(?:option\s*)?\(?\s*([a-z])\s*\)?(?:[\s.:)].*)?$", re.IGNORECASE | re.DOTALL
)


def option_id(text: str | None) -> str | None:
    """ "(c)", "c", "C." or "Option C: ..." → "c"; None when the text names no single option."""
    if text is None:
        return None
    m = _LETTER.match(text)
    return m.group(1).lower() if m else None


def _key(choice_id: str | None) -> str | None:
    """An option id as compared: its letter, or the id itself (lower case) when it is no letter."""
    if choice_id is None:
        return None
    return option_id(choice_id) or choice_id.strip().lower()


class PersonaMemProtocol(Protocol):
    name: ClassVar[str] = "personamem"
    version: ClassVar[str] = "1"
    metrics: ClassVar[tuple[str, ...]] = ("accuracy",)

    def applies(self, q: ProtocolQuestion) -> bool:
        return q.correct_choice_id is not None

    def score(self, q: ProtocolQuestion, p: Prediction, scope: Scope) -> list[QuestionScore]:
        if p.choice_id is None and p.answer is None:
            return [QuestionScore("qa", None, "accuracy", None, "no prediction for this question")]
        picked = _key(p.choice_id) if p.choice_id is not None else option_id(p.answer)
        return [
            QuestionScore(
                "qa",
                None,
                "accuracy",
                float(picked is not None and picked == _key(q.correct_choice_id)),
            )
        ]

    def groups(self, q: ProtocolQuestion, granularity: Granularity) -> Sequence[Group]:
        return [Group(q.source_type), Group("overall")]
