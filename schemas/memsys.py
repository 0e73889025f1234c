"""Inputs and outputs of the LLM steps of the consolidating memory systems (extractor role):
Mem0 (fact extraction, memory update), A-Mem (note construction, link generation, memory
evolution) and O-Mem (persona/event extraction, add/ignore/update routing).

Every step takes a *group* of consecutive traces (a conversation session, a day's notes; at most a
few) in one call, as Mem0's and A-Mem's implementations do with a batch of messages; each output
item names the trace, fact or note it belongs to, so the system keeps exact provenance and the
time each change became valid.

Ids shown to a model are short strings the system maps back to its own records (Mem0's
implementation does the same, so that a model never has to copy a UUID)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from clonemem.schemas.config import Language

GROUP_ITEMS = 256  # bound on the items of one call's list (a group of traces and their facts)


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class TraceView(_Frozen):
    """One trace of the group as a model sees it; ``id`` is short ("t0", "t1", ...)."""

    id: str
    medium: str
    event_date: str
    content: str


class MemoryEntry(_Frozen):
    """An existing memory as a model sees it."""

    id: str
    text: str


# -- Mem0 ---------------------------------------------------------------------------------------


class Mem0ExtractIn(_Frozen):
    """New traces, with the traces just before them as context (Mem0's m recent messages)."""

    traces: list[TraceView] = Field(min_length=1)
    recent: list[str] = Field(default_factory=list)
    language: Language = "en"


class Mem0Fact(_Frozen):
    trace: str  # the id of the trace the fact comes from
    text: str = Field(min_length=1)


class Mem0Facts(_Frozen):
    facts: list[Mem0Fact] = Field(default_factory=list, max_length=GROUP_ITEMS)


class NewFact(_Frozen):
    id: str  # short ("f0", "f1", ...)
    text: str
    event_date: str


class Mem0UpdateIn(_Frozen):
    """The group's candidate facts, in time order, and the existing memories most similar to them
    (the union of each fact's s nearest, as Mem0's implementation shows them)."""

    facts: list[NewFact] = Field(min_length=1)
    memories: list[MemoryEntry] = Field(default_factory=list)
    language: Language = "en"


class Mem0Operation(_Frozen):
    event: Literal["ADD", "UPDATE", "DELETE", "NONE"]
    id: str | None = (
        None  # UPDATE/DELETE: an existing memory or one ADDed earlier in this reply; ADD: a new id
    )
    text: str | None = None  # the memory's text (ADD, UPDATE)
    facts: list[str] = Field(default_factory=list)  # ids of the new facts the operation comes from

    @model_validator(mode="after")
    def _complete(self) -> Mem0Operation:
        if self.event in ("UPDATE", "DELETE") and not self.id:
            raise ValueError(f"{self.event} needs the id of an existing memory")
        if self.event in ("ADD", "UPDATE") and not (self.text or "").strip():
            raise ValueError(f"{self.event} needs the memory's text")
        return self


class Mem0Operations(_Frozen):
    operations: list[Mem0Operation] = Field(default_factory=list, max_length=GROUP_ITEMS)


# -- A-Mem --------------------------------------------------------------------------------------


class AMemNoteIn(_Frozen):
    traces: list[TraceView] = Field(min_length=1)
    language: Language = "en"


class AMemNote(_Frozen):
    """The LLM-written attributes of a note: keywords K, context X, tags G."""

    id: str  # the trace it describes
    keywords: list[str] = Field(default_factory=list, max_length=16)
    context: str = Field(min_length=1)
    tags: list[str] = Field(default_factory=list, max_length=16)


class AMemNotes(_Frozen):
    notes: list[AMemNote] = Field(default_factory=list, max_length=GROUP_ITEMS)


class AMemNoteView(_Frozen):
    """A note as shown to a model (the version current at the start of the step)."""

    id: str
    timestamp: str
    content: str
    keywords: list[str] = Field(default_factory=list)
    context: str = ""
    tags: list[str] = Field(default_factory=list)


class AMemNeighbourhood(_Frozen):
    """A new note and its nearest existing notes."""

    note: AMemNoteView
    neighbours: list[AMemNoteView] = Field(default_factory=list)


class AMemLinksIn(_Frozen):
    items: list[AMemNeighbourhood] = Field(min_length=1)
    language: Language = "en"


class AMemLinkSet(_Frozen):
    note: str  # the new note
    links: list[str] = Field(default_factory=list)  # ids of its neighbours to connect to


class AMemLinks(_Frozen):
    links: list[AMemLinkSet] = Field(default_factory=list, max_length=GROUP_ITEMS)


class AMemEvolveItem(_Frozen):
    note: AMemNoteView
    neighbours: list[AMemNoteView] = Field(default_factory=list)
    linked: list[str] = Field(default_factory=list)  # the neighbours the new note was linked to


class AMemEvolveIn(_Frozen):
    """New notes in time order with their neighbourhoods; later items see the effect of earlier ones
    only through the model's own reply (the neighbours are shown as they were before the group)."""

    items: list[AMemEvolveItem] = Field(min_length=1)
    language: Language = "en"


class AMemNeighbourUpdate(_Frozen):
    note: str  # the new note that causes the update
    id: str  # the neighbour that evolves
    context: str = Field(min_length=1)
    tags: list[str] = Field(default_factory=list, max_length=16)


class AMemEvolution(_Frozen):
    updates: list[AMemNeighbourUpdate] = Field(
        default_factory=list, max_length=GROUP_ITEMS
    )  # applied in order


# -- O-Mem --------------------------------------------------------------------------------------


class OMemExtractIn(_Frozen):
    traces: list[TraceView] = Field(min_length=1)
    language: Language = "en"


class OMemExtraction(_Frozen):
    """What one interaction reveals: topics t_i, persona attributes a_i, event facts e_i (eq. 1)."""

    id: str  # the trace
    topics: list[str] = Field(default_factory=list, max_length=6)
    keywords: list[str] = Field(default_factory=list, max_length=24)
    attributes: list[str] = Field(default_factory=list, max_length=24)
    facts: list[str] = Field(default_factory=list, max_length=24)


class OMemExtractions(_Frozen):
    interactions: list[OMemExtraction] = Field(default_factory=list, max_length=GROUP_ITEMS)


class OMemItem(_Frozen):
    id: str  # short ("i0", "i1", ...)
    kind: Literal["attribute", "fact"]
    text: str
    event_date: str


class OMemRouteIn(_Frozen):
    """The group's new attributes and event facts, in time order, and the existing entries most similar
    to them (eqs. 3-4): attribute ids start with "a", event-fact ids with "f"."""

    items: list[OMemItem] = Field(min_length=1)
    attributes: list[MemoryEntry] = Field(default_factory=list)
    facts: list[MemoryEntry] = Field(default_factory=list)
    language: Language = "en"


class OMemRoute(_Frozen):
    item: str  # the new item routed
    op: Literal["ADD", "IGNORE", "UPDATE"]
    id: str | None = (
        None  # UPDATE: the entry it replaces (existing, or an item ADDed earlier in this reply)
    )
    text: str | None = None  # the updated entry (UPDATE)

    @model_validator(mode="after")
    def _complete(self) -> OMemRoute:
        if self.op == "UPDATE" and (not self.id or not (self.text or "").strip()):
            raise ValueError("UPDATE needs the id of an existing entry and its new text")
        return self


class OMemRoutes(_Frozen):
    routes: list[OMemRoute] = Field(default_factory=list, max_length=GROUP_ITEMS)
