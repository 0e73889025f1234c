"""Flat, non-updatable retrievers over traces (CloneMem D.2): BM25, dense, hybrid (reciprocal rank
fusion), and the "combined" / "w/o org" ablations that index LLM-extracted summaries, keyphrases and
facts per trace beside (or instead of) the raw text. Indexes are built once; a question only masks
out units dated after it."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from clonemem.memory import memsys_stages as memory_stages
from clonemem.memory.base import BuildContext, MemorySystem, MemoryTrace, QuestionView, Retrieved
from clonemem.text import words

RRF_K = 60
logging.getLogger("bm25s").setLevel(logging.WARNING)


@dataclass(frozen=True)
class Unit:
    text: str
    trace_id: str
    when: object  # datetime
    kind: str


class _Flat(MemorySystem):
    """Retrieval over units; a trace contributes its raw text and/or its extracted memories."""

    raw = True
    extracted = False  # also index LLM-extracted summaries, keyphrases and facts (needs llm_stages below)

    def build(self, traces: Sequence[MemoryTrace], ctx: BuildContext) -> None:
        units = []
        calls = 0
        for t in sorted(traces, key=lambda t: (t.event_date, t.trace_id)):
            if self.raw:
                units.append(Unit(t.content, t.trace_id, t.event_date, "trace"))
            if self.extracted:
                from clonemem.schemas.memory import TraceSummary, TraceText

                out = ctx.llm(memory_stages.SUMMARIZE_TRACE.name, TraceText(trace_id=t.trace_id, medium=t.medium,
                                                                  event_date=t.event_date.isoformat(),
                                                                  content=t.content, language=ctx.language))
                calls += 1
                assert isinstance(out, TraceSummary)
                units.append(Unit(f"{out.summary} {' '.join(out.keyphrases)}", t.trace_id, t.event_date, "summary"))
                units += [Unit(f, t.trace_id, t.event_date, "fact") for f in out.facts]
        self.units = units
        self.when = np.array([u.when for u in units], dtype="datetime64[us]")
        self.index(units)
        ctx.stats.update(items=len(units), llm_calls=calls)

    def index(self, units: list[Unit]) -> None: ...

    def scores(self, query: str) -> np.ndarray: ...

    def retrieve(self, question: QuestionView, k: int) -> list[Retrieved]:
        mask = self.when <= np.datetime64(question.question_time, "us")
        from clonemem.memory.embed import top_k

        scores = self.scores(question.question)
        return [Retrieved(self.units[i].text, (self.units[i].trace_id,), float(scores[i]), self.units[i].kind)
                for i in top_k(scores, mask, k)]

    def stored(self, as_of=None) -> list[Retrieved]:  # noqa: ANN001 (datetime | None)
        """The indexed units dated at or before ``as_of`` (all when None), in index order."""
        units = self.units
        held = range(len(units)) if as_of is None else np.flatnonzero(self.when <= np.datetime64(as_of, "us"))
        return [Retrieved(units[i].text, (units[i].trace_id,), 0.0, units[i].kind) for i in held]


class BM25(_Flat):
    name = "bm25"

    def index(self, units: list[Unit]) -> None:
        import bm25s

        logging.getLogger("bm25s").setLevel(logging.WARNING)  # it logs every index build at DEBUG
        self._bm25 = bm25s.BM25()
        self._bm25.index([words(u.text) for u in units], show_progress=False)

    def scores(self, query: str) -> np.ndarray:
        tokens = [w for w in words(query) if w in self._bm25.vocab_dict]
        if not tokens:
            return np.zeros(len(self.units), dtype=np.float32)
        return np.asarray(self._bm25.get_scores(tokens), dtype=np.float32)


class Dense(_Flat):
    name = "dense"

    def index(self, units: list[Unit]) -> None:
        from clonemem.memory.embed import encode

        self._vectors = encode([u.text for u in units])

    def scores(self, query: str) -> np.ndarray:
        from clonemem.memory.embed import encode

        return self._vectors @ encode([query])[0]


class Hybrid(_Flat):
    """Reciprocal rank fusion of BM25 and dense rankings."""

    name = "hybrid"

    def index(self, units: list[Unit]) -> None:
        self._parts = [BM25(), Dense()]
        for part in self._parts:
            part.units = units
            part.index(units)

    def scores(self, query: str) -> np.ndarray:
        fused = np.zeros(len(self.units), dtype=np.float64)
        for part in self._parts:
            ranks = np.empty(len(self.units), dtype=np.int64)
            ranks[np.argsort(-part.scores(query), kind="stable")] = np.arange(len(self.units))
            fused += 1.0 / (RRF_K + ranks + 1)
        return fused


class FlatCombined(Hybrid):
    """Raw traces plus extracted summaries/keyphrases/facts (the paper's "combined")."""

    name = "flat_combined"
    extracted = True
    llm_stages = (memory_stages.SUMMARIZE_TRACE,)


class FlatExtractedOnly(Hybrid):
    """Extracted memories only (the paper's "w/o org")."""

    name = "flat_wo_org"
    raw = False
    extracted = True
    llm_stages = (memory_stages.SUMMARIZE_TRACE,)
