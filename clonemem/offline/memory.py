"""Offline handlers for memory systems' extractor steps."""

from __future__ import annotations

from clonemem import text
from clonemem.offline import OfflineCall
from clonemem.schemas.memory import TraceSummary, TraceText


def summarize_trace(call: OfflineCall) -> TraceSummary:
    """Summary, keyphrases and facts taken from the trace itself (extractive, never invented)."""
    assert isinstance(call.inputs, TraceText), "memory.summarize_trace needs TraceText inputs"
    trace = call.inputs
    sents = text.sentences(trace.content) or [trace.content.strip() or trace.medium]
    lead = sents[0]
    summary = lead if len(lead) <= 200 else lead[:197].rstrip() + "..."
    return TraceSummary(
        summary=f"{trace.medium.replace('_', ' ')} on {trace.event_date[:10]}: {summary}",
        keyphrases=text.keyphrases(trace.content, limit=8),
        facts=[s for s in sents if len(text.content_words(s)) >= 3][:6],
    )
