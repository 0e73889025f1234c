"""Flat, non-updatable retrievers over traces (CloneMem D.2): BM25, dense, hybrid, and the "combined" /
"w/o org" ablations that index LLM-extracted summaries, keyphrases and facts per trace beside (or
instead of) the raw text. Indexes are built once; a question only masks out units dated after it.

What is indexed is more than the trace's own words:
* a dialogue turn is indexed with the turn before it in the same session. A reply ("Researching
  adoption agencies") often answers a question whose words are only in the previous turn ("What
  have you been up to?"); on LoCoMo this context lifts BM25 recall@10 from 0.62 to 0.77. Only the
  previous turn is used, which is never later than the turn itself, so no future text leaks into an
  earlier question's view;
* BM25 also indexes the trace's date in words ("8 May 2023"), which questions sometimes name.

The returned text is the trace itself (the answerer gets what was written, not the index's view).

Built once, each retriever still retrieves for a question exactly what it would had it been given only
the traces dated at or before the question (chronological replay, ``clonemem.evaluation.replay``), so
its figures are `replay` figures (``exact_as_of``): units are held in time order, so the visible ones
are a prefix, and BM25 takes its corpus statistics (document count, document frequencies, mean length)
over that prefix at each question instead of over the whole history (``tests/test_retrieval_modes.py``).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from clonemem.memory import memsys_stages as memory_stages
from clonemem.memory.base import BuildContext, MemorySystem, MemoryTrace, QuestionView, Retrieved
from clonemem.schemas.config import DIALOGUE_MEDIA
from clonemem.text import retrieval_tokens

logging.getLogger("bm25s").setLevel(logging.WARNING)

SESSION_GAP = dt.timedelta(hours=1)  # turns further apart than this belong to different sessions


@dataclass(frozen=True)
class Unit:
    text: str  # handed to the answerer
    trace_id: str
    when: dt.datetime
    kind: str
    context: str = ""  # indexed before the text (the previous turn of a dialogue)
    date_words: str = ""  # indexed by BM25 only

    @property
    def indexed(self) -> str:
        return f"{self.context}\n{self.text}" if self.context else self.text


def date_words(when: dt.datetime, language: str) -> str:
    """A date as questions write it: "8 May 2023", or "2023年5月8日"."""
    if language.startswith("zh"):
        return f"{when.year}年{when.month}月{when.day}日"
    return f"{when.day} {when:%B} {when.year}"


def turn_context(traces: Sequence[MemoryTrace]) -> list[str]:
    """For each trace (in time order), the previous turn of the same dialogue session, else ""."""
    out = []
    for i, t in enumerate(traces):
        prev = traces[i - 1] if i else None
        same_session = (
            prev is not None
            and t.medium in DIALOGUE_MEDIA
            and prev.medium == t.medium
            and dt.timedelta(0) <= t.event_date - prev.event_date <= SESSION_GAP
        )
        out.append(prev.content if prev is not None and same_session else "")
    return out


class _Flat(MemorySystem):
    """Retrieval over units; a trace contributes its raw text and/or its extracted memories."""

    raw = True
    extracted = (
        False  # also index LLM-extracted summaries, keyphrases and facts (needs llm_stages below)
    )
    # a unit depends on its own trace and the turn before it, and scores on the visible prefix only
    exact_as_of = True

    def build(self, traces: Sequence[MemoryTrace], ctx: BuildContext) -> None:
        ordered = sorted(traces, key=lambda t: (t.event_date, t.trace_id))
        context = turn_context(ordered)
        units: list[Unit] = []
        calls = 0
        for t, before in zip(ordered, context):
            said = date_words(t.event_date, ctx.language)
            if self.raw:
                units.append(Unit(t.content, t.trace_id, t.event_date, "trace", before, said))
            if self.extracted:
                from clonemem.schemas.memory import TraceSummary, TraceText

                out = ctx.llm(
                    memory_stages.SUMMARIZE_TRACE.name,
                    TraceText(
                        trace_id=t.trace_id,
                        medium=t.medium,
                        event_date=t.event_date.isoformat(),
                        content=t.content,
                        language=ctx.language,
                    ),
                )
                calls += 1
                assert isinstance(out, TraceSummary)
                units.append(
                    Unit(
                        f"{out.summary} {' '.join(out.keyphrases)}",
                        t.trace_id,
                        t.event_date,
                        "summary",
                        date_words=said,
                    )
                )
                units += [
                    Unit(f, t.trace_id, t.event_date, "fact", date_words=said) for f in out.facts
                ]
        self.units = units
        self._held_items: dict[
            dt.datetime | None, tuple[Retrieved, ...]
        ] = {}  # stored() per time, until the next build
        self.when = np.array([_naive(u.when) for u in units], dtype="datetime64[us]")
        self.index(units)
        ctx.stats.update(items=len(units), llm_calls=calls)

    def index(self, units: list[Unit]) -> None: ...

    def scores(self, query: str, upto: int) -> np.ndarray:
        """Every unit's score for ``query`` as seen by a question whose visible units are the first
        ``upto`` (corpus statistics from those alone; later units' scores are not used)."""
        raise NotImplementedError(f"{type(self).__name__} scores its units itself")

    def seen(self, question: QuestionView) -> int:
        """How many units (a prefix: they are in time order) are dated at or before the question."""
        return int(
            np.searchsorted(
                self.when, np.datetime64(_naive(question.question_time), "us"), side="right"
            )
        )

    def visible(self, question: QuestionView) -> np.ndarray:
        return np.arange(len(self.units)) < self.seen(question)

    def retrieve(self, question: QuestionView, k: int) -> list[Retrieved]:
        from clonemem.memory.embed import top_k

        mask = self.visible(question)
        scores = self.scores(question.question, self.seen(question))
        return [
            Retrieved(
                self.units[i].text, (self.units[i].trace_id,), float(scores[i]), self.units[i].kind
            )
            for i in top_k(scores, mask, k)
        ]

    def stored(self, as_of=None) -> list[Retrieved]:
        """The indexed units dated at or before ``as_of`` (all when None), in index order."""
        if (
            as_of not in self._held_items
        ):  # made once per time (questions asked at one time share it)
            units = self.units
            held = (
                range(len(units))
                if as_of is None
                else np.flatnonzero(self.when <= np.datetime64(as_of, "us"))
            )
            self._held_items[as_of] = tuple(
                Retrieved(units[i].text, (units[i].trace_id,), 0.0, units[i].kind) for i in held
            )
        return list(self._held_items[as_of])


def _naive(t: dt.datetime) -> dt.datetime:
    """Aware times compared in UTC, as the warehouse stores them."""
    return t.astimezone(dt.timezone.utc).replace(tzinfo=None) if t.tzinfo is not None else t


class BM25(_Flat):
    """Lucene BM25 (k1 = 1.5, b = 0.75, the scoring bm25s computes) over stemmed, stop-word-free terms
    (``retrieval_tokens``), with the corpus statistics of the units visible to the question: the
    number of units, each term's document frequency and the mean unit length over the visible prefix.
    Statistics over the whole history (bm25s's index) let later traces change earlier questions'
    rankings, so a build and a replay of the same history disagreed (recall_flat@5 0.2468 vs 0.2447
    on the demo); these are the replay's statistics, computed from one index per persona."""

    name = "bm25"
    k1 = 1.5
    b = 0.75

    def index(self, units: list[Unit]) -> None:
        self._n = len(units)
        postings: dict[str, tuple[list[int], list[int]]] = {}
        lengths = np.zeros(len(units), dtype=np.float64)
        for i, u in enumerate(units):
            terms = retrieval_tokens(f"{u.date_words}\n{u.indexed}")
            lengths[i] = len(terms)
            for term, tf in Counter(terms).items():
                docs, tfs = postings.setdefault(term, ([], []))
                docs.append(i)
                tfs.append(tf)
        # per term: the units holding it (ascending, so those visible are a prefix) and its counts there
        self._postings = {
            t: (np.asarray(d, dtype=np.int64), np.asarray(f, dtype=np.float64))
            for t, (d, f) in postings.items()
        }
        self._lengths = lengths
        self._cumulative = np.cumsum(
            lengths
        )  # the visible prefix's total length, summed the same way

    def scores(self, query: str, upto: int) -> np.ndarray:
        out = np.zeros(self._n, dtype=np.float64)
        if upto <= 0 or not self._cumulative[upto - 1]:
            return out
        mean_length = self._cumulative[upto - 1] / upto
        for term in retrieval_tokens(query):  # a repeated query term counts again, as in bm25s
            if term not in self._postings:
                continue
            docs, tfs = self._postings[term]
            df = int(np.searchsorted(docs, upto))  # the visible units holding the term
            if not df:
                continue
            idf = np.log(1 + (upto - df + 0.5) / (df + 0.5))
            d, tf = docs[:df], tfs[:df]
            out[d] += (
                idf * tf / (self.k1 * ((1 - self.b) + self.b * self._lengths[d] / mean_length) + tf)
            )
        return out


class Dense(_Flat):
    """Cosine similarity of multilingual-e5-small embeddings (``clonemem.memory.embed``): units as
    passages (with their turn context), the question as a query."""

    name = "dense"

    def index(self, units: list[Unit]) -> None:
        from clonemem.memory.embed import encode_passages

        self._vectors = encode_passages([u.indexed for u in units])

    def scores(self, query: str, upto: int) -> np.ndarray:
        from clonemem.memory.embed import encode

        return self._vectors @ encode([query], role="query")[0]


def standardised(scores: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Scores as z-scores over the visible units (so two scorers' scales can be added)."""
    out = np.zeros(scores.shape, dtype=np.float64)
    if mask.any():
        sub = scores[mask].astype(np.float64)
        out[mask] = (sub - sub.mean()) / (sub.std() + 1e-9)
    return out


class Hybrid(_Flat):
    """BM25 + dense, fused by adding their z-scores (equal weights). Unlike reciprocal rank fusion,
    score fusion keeps how far ahead a unit is: a confident BM25 match is not pulled down by a
    middling dense rank (LoCoMo dev, recall@5: 0.72 with z-scores, 0.65 with RRF)."""

    name = "hybrid"

    def index(self, units: list[Unit]) -> None:
        self._parts = [BM25(), Dense()]
        for part in self._parts:
            part.units = units
            part.index(units)

    def retrieve(self, question: QuestionView, k: int) -> list[Retrieved]:
        from clonemem.memory.embed import top_k

        mask = self.visible(question)
        upto = self.seen(question)
        fused = sum(
            (standardised(part.scores(question.question, upto), mask) for part in self._parts),
            np.zeros(len(self.units)),
        )
        return [
            Retrieved(
                self.units[i].text, (self.units[i].trace_id,), float(fused[i]), self.units[i].kind
            )
            for i in top_k(fused, mask, k)
        ]


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
