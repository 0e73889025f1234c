"""Inputs and outputs of the LLM steps of the consolidating memory systems (extractor role):
Mem0 (fact extraction, memory update), A-Mem (note construction, link generation, memory
evolution) and O-Mem (persona/event extraction, add/ignore/update routing).

Memory ids shown to a model are short strings the system maps back to its own records (Mem0's
implementation does the same, so that a model never has to copy a UUID)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from clonemem.schemas.config import Language


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class MemoryEntry(_Frozen):
    """An existing memory as a model sees it."""

    id: str
    text: str


# -- Mem0 ---------------------------------------------------------------------------------------


class Mem0ExtractIn(_Frozen):
    """One new trace, with the traces just before it as context (Mem0's m recent messages)."""

    trace_id: str
    medium: str
    event_date: str
    content: str
    recent: list[str] = Field(default_factory=list)
    language: Language = "en"


class Mem0Facts(_Frozen):
    facts: list[str] = Field(default_factory=list, max_length=24)


class Mem0UpdateIn(_Frozen):
    """One candidate fact and the most similar existing memories."""

    fact: str
    event_date: str
    memories: list[MemoryEntry] = Field(default_factory=list)
    language: Language = "en"


class Mem0Operation(_Frozen):
    event: Literal["ADD", "UPDATE", "DELETE", "NONE"]
    id: str | None = None  # the memory an UPDATE or DELETE applies to
    text: str | None = None  # the memory's new text (UPDATE)

    @model_validator(mode="after")
    def _complete(self) -> Mem0Operation:
        if self.event in ("UPDATE", "DELETE") and not self.id:
            raise ValueError(f"{self.event} needs the id of an existing memory")
        if self.event == "UPDATE" and not (self.text or "").strip():
            raise ValueError("UPDATE needs the memory's new text")
        return self


# -- A-Mem --------------------------------------------------------------------------------------


class AMemNoteIn(_Frozen):
    trace_id: str
    medium: str
    event_date: str
    content: str
    language: Language = "en"


class AMemNote(_Frozen):
    """The LLM-written attributes of a note: keywords K, context X, tags G."""

    keywords: list[str] = Field(default_factory=list, max_length=16)
    context: str = Field(min_length=1)
    tags: list[str] = Field(default_factory=list, max_length=16)


class AMemNoteView(_Frozen):
    """A note as shown to a model (the version current at the time of the step)."""

    id: str
    timestamp: str
    content: str
    keywords: list[str] = Field(default_factory=list)
    context: str = ""
    tags: list[str] = Field(default_factory=list)


class AMemLinksIn(_Frozen):
    note: AMemNoteView
    neighbours: list[AMemNoteView] = Field(default_factory=list)
    language: Language = "en"


class AMemLinks(_Frozen):
    links: list[str] = Field(default_factory=list)  # ids of neighbours to connect to


class AMemEvolveIn(_Frozen):
    note: AMemNoteView
    neighbours: list[AMemNoteView] = Field(default_factory=list)
    linked: list[str] = Field(default_factory=list)  # the neighbours the new note was linked to
    language: Language = "en"


class AMemNeighbourUpdate(_Frozen):
    id: str
    context: str = Field(min_length=1)
    tags: list[str] = Field(default_factory=list, max_length=16)


class AMemEvolution(_Frozen):
    updates: list[AMemNeighbourUpdate] = Field(default_factory=list)  # neighbours left out stay as they are


# -- O-Mem --------------------------------------------------------------------------------------


class OMemExtractIn(_Frozen):
    trace_id: str
    medium: str
    event_date: str
    content: str
    language: Language = "en"


class OMemExtraction(_Frozen):
    """What one interaction reveals: topics t_i, persona attributes a_i, event facts e_i (eq. 1)."""

    topics: list[str] = Field(default_factory=list, max_length=6)
    keywords: list[str] = Field(default_factory=list, max_length=24)
    attributes: list[str] = Field(default_factory=list, max_length=24)
    facts: list[str] = Field(default_factory=list, max_length=24)


class OMemRouteIn(_Frozen):
    """One new attribute (or event fact) and the most similar existing ones (eqs. 3-4)."""

    kind: Literal["attribute", "fact"]
    item: str
    event_date: str
    existing: list[MemoryEntry] = Field(default_factory=list)
    language: Language = "en"


class OMemRoute(_Frozen):
    op: Literal["ADD", "IGNORE", "UPDATE"]
    id: str | None = None  # the existing entry an UPDATE replaces
    text: str | None = None  # the updated entry (UPDATE)

    @model_validator(mode="after")
    def _complete(self) -> OMemRoute:
        if self.op == "UPDATE" and (not self.id or not (self.text or "").strip()):
            raise ValueError("UPDATE needs the id of an existing entry and its new text")
        return self
