"""LLM steps of the flat retrievers' extraction ablations (extractor role)."""

from __future__ import annotations

from clonemem.schemas.memory import TraceSummary, TraceText
from clonemem.stages import define

SUMMARIZE_TRACE = define("memory.summarize_trace", "summarize_trace", "extractor", TraceText, TraceSummary)
