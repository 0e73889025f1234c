"""Answerer and judge steps."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from clonemem.schemas.config import Language
from clonemem.schemas.qa import Choice


class _M(BaseModel):
    model_config = ConfigDict(frozen=True)


class AnswerInput(_M):
    """The AI clone answers in the persona's voice strictly from the retrieved memories."""

    persona_name: str
    question: str
    question_time: str
    memories: list[str]
    mode: Literal["free", "choice"]
    choices: list[Choice] = Field(default_factory=list)
    language: Language = "en"


class FreeAnswer(_M):
    answer: str


class ChoiceAnswer(_M):
    choice_id: str
    reason: str


class JudgeInput(_M):
    question: str
    question_type: str
    reference_answer: str
    candidate_answer: str
    gold_statements: list[str]
    retrieved: list[str]
    language: Language = "en"


class JudgeVerdict(_M):
    """qa_consistency 0–3; mem_covered = how many gold statements the retrieved memories cover;
    mem_helpful 0–2."""

    qa_consistency: int = Field(ge=0, le=3)
    mem_covered: int = Field(ge=0)
    mem_helpful: int = Field(ge=0, le=2)
    reason: str


class SupportInput(_M):
    """Failure diagnosis: does a stored memory state the gold statement? (memories numbered from 1)"""

    statement: str
    memories: list[str]
    language: Language = "en"


class SupportVerdict(_M):
    supported: list[int] = Field(
        default_factory=list, description="numbers of the memories that state it"
    )
    reason: str = ""


class PrivacyRespondInput(_M):
    """The AI clone answers someone in the persona's life, for their purpose, from the retrieved memories."""

    persona_name: str
    recipient: str
    purpose: str
    request: str
    question_time: str
    memories: list[str]
    language: Language = "en"


class PrivacyJudgeInput(_M):
    """Per item: did the response disclose this sensitive item, convey this necessary one?"""

    request: str
    response: str
    recipient: str
    persona_name: str
    necessary: list[str]
    sensitive: list[str]
    language: Language = "en"


class PrivacyVerdict(_M):
    """One verdict per item, in the order given (``disclosed`` per sensitive item, ``conveyed`` per necessary
    item); lists of another length leave the task unscored, with that reason."""

    disclosed: list[bool]
    conveyed: list[bool]
    reason: str


# -- the standard protocols' answerers and judges ------------------------------------------


class ProtocolAnswerInput(_M):
    """A protocol's answerer: the question, when it is asked, and the retrieved memories (each led
    by its session's date)."""

    question: str
    question_date: str
    memories: list[str]
    language: Language = "en"


class Mem0JudgeInput(_M):
    """mem0's J judge: a generated answer against the gold answer."""

    question: str
    gold_answer: str
    generated_answer: str
    language: Language = "en"


class Mem0Verdict(_M):
    """A one-sentence reason, then the label: ``CORRECT`` scores 1, anything else 0."""

    reason: str
    label: str


class LongMemEvalJudgeInput(_M):
    """LongMemEval's judge: the response against the answer (for a preference question, a rubric;
    for an abstention question, why it cannot be answered), with the question type's criteria."""

    question_type: str
    question: str
    answer: str
    response: str
    abstention: bool = False
    language: Language = "en"


class YesNoReply(_M):
    """The judge's reply; correct when it contains "yes" (any case)."""

    reply: str
