"""Inputs and outputs of the memory systems' own LLM steps (extractor role)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from clonemem.schemas.config import Language


class TraceText(BaseModel):
    """One digital trace as a memory system sees it."""

    model_config = ConfigDict(frozen=True)

    trace_id: str
    medium: str
    event_date: str
    content: str
    language: Language = "en"


class TraceSummary(BaseModel):
    """Per-trace organisation used by the flat retriever's "combined" ablations (D.2)."""

    summary: str = Field(min_length=1)
    keyphrases: list[str] = Field(default_factory=list, max_length=12)
    facts: list[str] = Field(default_factory=list)
