"""The public CloneMem release format: one JSON file per persona.

Unknown fields are ignored; types are strict (a number where a string id belongs is an error).
The published files keep their questions under ``qa_items`` while the release's README says
``questions``: both are accepted (exactly one of them must be present; the importer checks).
"""

from __future__ import annotations

import datetime as dt

from pydantic import BaseModel, ConfigDict, Field

E_TEXT = "Cannot be determined based on available information"
QUESTION_KEYS = ("questions", "qa_items")


class _Release(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True, frozen=True)


class ReleaseTrace(_Release):
    id: str = Field(min_length=1)
    medium: str
    event_date: dt.datetime
    content: str


class ReleaseEvidence(_Release):
    statement: str
    digital_trace_ids: list[str] = Field(default_factory=list)


class ReleaseChoice(_Release):
    id: str = Field(min_length=1)
    text: str


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


class ReleaseFile(_Release):
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
