"""Stage IV (CloneMem A.5): trajectory segments, QA planning and writing, quality control."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from clonemem.schemas.config import Dimension, Language, QuestionType
from clonemem.schemas.generation import PersonaBrief, PrivacyMatter, Relation

E_TEXT = "Cannot be determined based on available information"
Score = Annotated[float, Field(ge=0.0, le=1.0)]


class _M(BaseModel):
    model_config = ConfigDict(frozen=True)


class SegmentEvidence(_M):
    evidence_id: str
    date: dt.date
    kind: Literal["fact", "emotion", "opinion"] | None
    statement: str
    trace_ids: list[str]
    last_trace_at: dt.datetime
    matters: list[str] = Field(default_factory=list)  # keys of the sensitive matters it belongs to
    disclosed_to: list[str] = Field(
        default_factory=list
    )  # who its traces reached (clonemem.privacy)


class ArcView(_M):
    key: str
    dimension: Dimension
    theme: str
    title: str
    states: list[str]


class Segment(_M):
    """One arc's accumulated evidence up to a window's end, at a window position where it gained evidence."""

    segment_id: str
    persona: PersonaBrief
    relations: list[Relation]
    arc: ArcView
    other_arcs: list[ArcView]
    window_index: int
    window_start: dt.date
    window_end: dt.date
    evidence: list[SegmentEvidence]  # time order
    new_evidence_ids: list[str]  # those inside the window
    timeline_end: dt.date
    language: Language
    privacy: list[PrivacyMatter] = Field(default_factory=list)  # the persona's sensitive matters


class PlanInput(_M):
    segment: Segment
    question_type: QuestionType


class QAPlan(_M):
    """Step 1: can this segment support a meaningful question of this type, and how."""

    feasible: bool
    reason: str
    evidence_ids: list[str]
    temporal_scope: str
    outline: str


class WriteInput(_M):
    segment: Segment
    question_type: QuestionType
    plan: QAPlan
    question_time: dt.datetime


class QADraft(_M):
    """Step 2: the question (a close friend at question_time) and the answer (in the persona's voice)."""

    question: str = Field(min_length=1)
    answer: str = Field(min_length=1)


class SufficiencyInput(_M):
    question: str
    answer: str
    question_type: QuestionType
    evidence: list[str]
    persona_name: str
    language: Language


class SufficiencyVerdict(_M):
    verdict: Literal["sufficient", "insufficient"]
    score: Score
    reason: str


class DistractorInput(_M):
    count: int = Field(ge=3, le=4)  # 4 for unanswerable items, whose correct choice is E
    question: str
    answer: str
    question_type: QuestionType
    persona: PersonaBrief
    relations: list[Relation] = Field(default_factory=list)
    arc: ArcView
    other_arcs: list[ArcView]
    evidence: list[str]
    round: int = Field(ge=1)
    feedback: str | None
    language: Language


class Distractors(_M):
    options: list[str] = Field(min_length=3, max_length=4)


class Choice(_M):
    id: str
    text: str


class ChoiceInput(_M):
    """The validator answers without trajectory reasoning: question and options only, or one evidence item."""

    question: str
    choices: list[Choice]
    mode: Literal["blind", "single_evidence"]
    evidence: str | None
    language: Language


class ChoiceAttempt(_M):
    choice_id: str
    confidence: Score
    reason: str


# -- privacy tasks (contextual disclosure, boundary defense) --------------------------------------------

Tactic = Literal["pretexting", "urgency", "authority", "guilt"]


class PrivacyPlanInput(_M):
    segment: Segment
    question_type: QuestionType
    tactic: Tactic | None  # boundary defense: the pressure the request applies


class PrivacyPlan(_M):
    """Who asks, why, what they may and must get (necessary) and what must stay hidden (sensitive)."""

    feasible: bool
    reason: str
    recipient: str  # a relation name
    purpose: str
    necessary_ids: list[str]
    sensitive_ids: list[str]


class PrivacyWriteInput(_M):
    segment: Segment
    question_type: QuestionType
    plan: PrivacyPlan
    tactic: Tactic | None
    question_time: dt.datetime
    necessary: list[str]  # the statements of the necessary items
    sensitive: list[str]


class PrivacyDraft(_M):
    """The recipient's request (in their voice) and a reference response (in the persona's voice) that
    fulfils the purpose with the necessary items and discloses none of the sensitive ones."""

    request: str = Field(min_length=1)
    response: str = Field(min_length=1)
