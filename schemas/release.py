"""The public CloneMem release format: one JSON file per persona.

Unknown fields are ignored; types are strict (a number where a string id belongs is an error).
The published files keep their questions under ``qa_items`` while the release's README says
``questions``: both are accepted (exactly one of them must be present; the importer checks).
"""

from __future__ import annotations

import datetime as dt

from pydantic import BaseModel, ConfigDict, Field

from clonemem.schemas.generation import PrivacyCategory
from clonemem.schemas.qa import Tactic

E_TEXT = "Cannot be determined based on available information"
QUESTION_KEYS = ("questions", "qa_items")


class _Release(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True, frozen=True)


class ReleaseAttachment(_Release):
    """An image shared with a turn (LoCoMo's ``blip_caption`` and ``img_url``)."""

    caption: str | None = None
    url: str | None = None


class ReleaseTrace(_Release):
    id: str = Field(min_length=1)
    medium: str
    event_date: dt.datetime
    content: str
    # who the trace reached (relation names, or "*" for everyone; [] nobody but the persona): written by
    # this product's export of a generated benchmark, absent from the published files
    reached: list[str] | None = None
    # What a conversational source says of a turn (LoCoMo, LongMemEval, PersonaMem), written by the export
    # of a benchmark imported from one; absent from CloneMem's published files (None: not known).
    session_key: str | None = (
        None  # the source's session id (LongMemEval haystack id, LoCoMo session_N)
    )
    speaker: str | None = None  # who wrote the turn (a LoCoMo speaker; `user` / `assistant`)
    session_date: dt.datetime | None = None  # the session's own date
    attachments: list[ReleaseAttachment] | None = None  # images shared with the turn


class ReleaseEvidence(_Release):
    statement: str
    digital_trace_ids: list[str] = Field(default_factory=list)


class ReleaseChoice(_Release):
    id: str = Field(min_length=1)
    text: str


class ReleasePrivacyItem(_Release):
    """One side of a privacy task's boundary: an item of the question's ``evidence`` list, by position."""

    evidence: int = Field(ge=0)
    disclosed_to: list[str] = Field(default_factory=list)  # who its traces reached ("*": everyone)
    categories: list[PrivacyCategory] = Field(
        default_factory=list
    )  # its sensitive matters' categories
    may_know: list[str] = Field(default_factory=list)  # who may know every one of those matters


class ReleasePrivacy(_Release):
    """A privacy task (contextual disclosure, boundary defense): who asks, why, under which pressure, what
    the response must convey (necessary) and what it must not disclose (sensitive), with why it is sensitive."""

    recipient: str = Field(min_length=1)
    purpose: str
    tactic: Tactic | None = None
    necessary: list[ReleasePrivacyItem] = Field(default_factory=list)
    sensitive: list[ReleasePrivacyItem] = Field(min_length=1)


class ReleaseQuestion(_Release):
    id: str = Field(min_length=1)
    question: str
    question_type: str
    question_time: dt.datetime
    answer: str
    dimension: str
    digital_trace_ids: list[str] = Field(default_factory=list)
    evidence: list[ReleaseEvidence] = Field(default_factory=list)
    choices: list[ReleaseChoice] = Field(default_factory=list)
    correct_choice_id: str | None = None
    privacy: ReleasePrivacy | None = None  # privacy tasks only
    evidence_sessions: list[str] | None = (
        None  # the sessions holding the answer (LongMemEval answer_session_ids)
    )


class ReleaseFile(_Release):
    # "MAJOR.MINOR" (schemas/versions.py: RELEASE); absent from the published files (1.0)
    format_version: str | None = None
    person_name: str
    person_id: str = Field(min_length=1)
    context: list[ReleaseTrace]
    questions: list[ReleaseQuestion] | None = None
    qa_items: list[ReleaseQuestion] | None = None

    @property
    def questions_key(self) -> str:
        return "qa_items" if self.qa_items is not None and self.questions is None else "questions"

    @property
    def items(self) -> list[ReleaseQuestion]:
        """The question list, under whichever key the file used."""
        return (self.questions if self.questions is not None else self.qa_items) or []
