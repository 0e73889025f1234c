"""A memory system with an LLM stage: one key-fact note per trace, retrieved by word overlap.

What it shows a plugin author (written against the public API, ``clonemem.plugin``, only):

* its own stage, defined with ``clonemem.plugin.define``: a name, a prompt template shipped in this
  package (``"clonemem_example_plugin:keyfacts"`` is ``templates/keyfacts.j2`` here), the role whose
  model runs it (``extractor``), typed input and output, and the offline handler below, which answers
  the stage without a model (offline runs, tests) deterministically from its inputs;
* ``llm_stages`` on the class: the only stages ``ctx.llm`` runs for it, and what its cached results are
  keyed on besides its code (the template's hash, the extractor's model, the seed offline);
* ``ingest`` that adds only new traces (the default would rebuild, paying again for old ones), and
  ``stored()`` listing its notes, each with the trace id it came from.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from clonemem.plugin import (
    BuildContext,
    MemorySystem,
    MemoryTrace,
    OfflineCall,
    QuestionView,
    Retrieved,
    define,
)
from clonemem_example_plugin.tfidf import terms


class KeyFactIn(BaseModel):
    """One trace, as the stage's prompt sees it (``language`` picks the prompt's output language)."""

    model_config = ConfigDict(frozen=True)

    trace_id: str
    medium: str
    event_date: str  # ISO 8601
    content: str
    language: str = "en"


class KeyFact(BaseModel):
    fact: str = Field(min_length=1, max_length=400)


KEYFACT = define(
    "example.keyfact",
    "clonemem_example_plugin:keyfacts",
    "extractor",
    KeyFactIn,
    KeyFact,
    offline="clonemem_example_plugin.keyfacts:offline_keyfacts",
)

_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s*")
_MAX_WORDS = 40


def offline_keyfacts(call: OfflineCall) -> KeyFact:
    """The offline answer: the trace's first sentence (extractive, never invented), cut to 40 words."""
    assert isinstance(call.inputs, KeyFactIn), "example.keyfact needs KeyFactIn inputs"
    trace = call.inputs
    sentences = [s.strip() for s in _SENTENCE_END.split(trace.content) if s.strip()]
    lead = sentences[0] if sentences else trace.medium.replace("_", " ")
    words = lead.split()
    if len(words) > _MAX_WORDS:
        lead = " ".join(words[:_MAX_WORDS]) + " ..."
    return KeyFact(fact=lead[:400])


@dataclass(frozen=True)
class _Note:
    text: str
    trace_id: str
    when: dt.datetime
    terms: frozenset[str]


class KeyFactsMemory(MemorySystem):
    name = "keyfacts"
    llm_stages = (KEYFACT,)

    def build(self, traces: Sequence[MemoryTrace], ctx: BuildContext) -> None:
        self.reset(ctx)
        self.ingest(traces, ctx)

    def reset(self, ctx: BuildContext) -> None:
        self._notes: list[_Note] = []

    def ingest(self, traces: Sequence[MemoryTrace], ctx: BuildContext) -> None:
        if not hasattr(self, "_notes"):
            self.reset(ctx)
        for t in sorted(traces, key=lambda t: (t.event_date, t.trace_id)):
            out = ctx.llm(
                KEYFACT.name,
                KeyFactIn(
                    trace_id=t.trace_id,
                    medium=t.medium,
                    event_date=t.event_date.isoformat(),
                    content=t.content,
                    language=ctx.language,
                ),
            )
            assert isinstance(out, KeyFact)
            self._notes.append(
                _Note(out.fact, t.trace_id, t.event_date, frozenset(terms(out.fact)))
            )
        self._notes.sort(key=lambda n: (n.when, n.trace_id))
        ctx.stats.update(
            items=len(self._notes), llm_calls=ctx.stats.get("llm_calls", 0) + len(traces)
        )

    def retrieve(self, question: QuestionView, k: int) -> list[Retrieved]:
        """Visible notes sharing the most distinct words with the question (ties: the newer first)."""
        asked = frozenset(terms(question.question))
        scored = [
            (len(asked & n.terms), n) for n in self._notes if n.when <= question.question_time
        ]
        scored = [(s, n) for s, n in scored if s > 0]
        scored.sort(key=lambda sn: (-sn[0], -sn[1].when.timestamp(), sn[1].trace_id))
        return [Retrieved(n.text, (n.trace_id,), float(s), "note") for s, n in scored[:k]]

    def stored(self, as_of: dt.datetime | None = None) -> list[Retrieved]:
        """Every note valid at ``as_of`` (all of them for None), in time order."""
        return [
            Retrieved(n.text, (n.trace_id,), 0.0, "note")
            for n in self._notes
            if as_of is None or n.when <= as_of
        ]
