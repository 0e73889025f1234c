"""Mem0 (Chhikara et al., 2025): fact-based consolidation.

Two phases per trace, in time order. *Extraction*: an LLM step distils the trace (with the few traces
before it as context, Mem0's recent messages) into candidate facts. *Update*: for each fact the s most
similar existing memories are retrieved by embedding, and an LLM step picks one operation: ADD a new
memory, UPDATE a memory (new text), DELETE a contradicted memory, or NONE.

Consolidation is kept as versions so questions can be answered "as of" their time without a rebuild:
every memory version records when it became valid (its trace's date), when it was superseded or
deleted, and the traces it came from (an UPDATE keeps the old sources and adds the new trace).
Retrieval scores the versions valid at the question's time by cosine similarity.

This module also holds the two small pieces the other consolidating systems share: the versioned
vector table and the batched text-embedding cache.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from clonemem.memory import memsys_stages as stages
from clonemem.memory.base import BuildContext, MemorySystem, MemoryTrace, QuestionView, Retrieved
from clonemem.schemas.memsys import Mem0ExtractIn, Mem0Facts, Mem0Operation, Mem0UpdateIn, MemoryEntry

DIM = 384
NEVER = np.datetime64("9999-12-31T00:00:00", "us")
RECENT_TRACES = 2  # context for extraction (Mem0 uses the m most recent messages)
RECENT_CHARS = 300
TOP_S = 10  # similar memories shown to the update step (Mem0: s = 10)


# -- shared helpers -------------------------------------------------------------------------------


def when(t: dt.datetime) -> np.datetime64:
    """A timestamp as numpy microseconds (aware times are taken in UTC, as the warehouse stores them)."""
    if t.tzinfo is not None:
        t = t.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return np.datetime64(t, "us")


def in_order(traces: Sequence[MemoryTrace]) -> list[MemoryTrace]:
    return sorted(traces, key=lambda t: (when(t.event_date), t.trace_id))


def unique(items: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for item in items:
        item = " ".join(str(item).split())
        if item and item.lower() not in seen:
            seen.add(item.lower())
            out.append(item)
    return out


class TextVectors:
    """Embeddings by text, computed in batches and cached (a text is embedded once per build)."""

    def __init__(self) -> None:
        self._cache: dict[str, np.ndarray] = {}
        self.encoded = 0

    def add(self, texts: Iterable[str]) -> None:
        todo = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if todo:
            from clonemem.memory.embed import encode

            for text, vec in zip(todo, encode(todo)):
                self._cache[text] = vec
            self.encoded += len(todo)

    def __getitem__(self, text: str) -> np.ndarray:
        if text not in self._cache:
            self.add([text])
        return self._cache[text]


@dataclass
class Versions:
    """An append-only table of memory versions: text, sources, validity interval, vector.

    A version is visible at ``as_of`` when ``start <= as_of < end``; the current version of a live
    memory has ``end = NEVER``."""

    memory: list[int] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    sources: list[tuple[str, ...]] = field(default_factory=list)
    _start: list[np.datetime64] = field(default_factory=list)
    _end: list[np.datetime64] = field(default_factory=list)
    _vecs: np.ndarray = field(default_factory=lambda: np.zeros((64, DIM), dtype=np.float32))
    current: dict[int, int] = field(default_factory=dict)  # live memory -> its current version
    _next_memory: int = 0

    def __len__(self) -> int:
        return len(self.texts)

    def new_memory(self) -> int:
        self._next_memory += 1
        return self._next_memory - 1

    def add(self, memory: int, text: str, sources: tuple[str, ...], start: np.datetime64, vec: np.ndarray) -> int:
        i = len(self.texts)
        if i == self._vecs.shape[0]:
            self._vecs = np.concatenate([self._vecs, np.zeros_like(self._vecs)])
        self._vecs[i] = vec
        self.memory.append(memory)
        self.texts.append(text)
        self.sources.append(sources)
        self._start.append(start)
        self._end.append(NEVER)
        self.current[memory] = i
        return i

    def close(self, memory: int, at: np.datetime64) -> int:
        """End the memory's current version at ``at`` (superseded or deleted); returns that version."""
        i = self.current.pop(memory)
        self._end[i] = at
        return i

    @property
    def vectors(self) -> np.ndarray:
        return self._vecs[: len(self.texts)]

    def similar(self, vec: np.ndarray, s: int) -> list[tuple[int, float]]:
        """The s current versions most similar to ``vec`` (version index, cosine), best first."""
        live = np.fromiter(self.current.values(), dtype=np.int64)
        if live.size == 0:
            return []
        live.sort()
        sims = self._vecs[live] @ vec
        order = np.argsort(-sims, kind="stable")[:s]  # ties: the older version first
        return [(int(live[j]), float(sims[j])) for j in order]

    def freeze(self) -> None:
        self.start = np.array(self._start, dtype="datetime64[us]")
        self.end = np.array(self._end, dtype="datetime64[us]")

    def visible(self, as_of: np.datetime64) -> np.ndarray:
        return (self.start <= as_of) & (self.end > as_of)

    def superseded(self) -> int:
        return int(np.sum(self.end != NEVER)) if len(self) else 0


def clip(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 3].rstrip() + "..."


# -- Mem0 ---------------------------------------------------------------------------------------------


class Mem0(MemorySystem):
    name = "mem0"
    llm_stages = (stages.MEM0_EXTRACT, stages.MEM0_UPDATE)

    def __init__(self, top_s: int = TOP_S) -> None:
        self.top_s = top_s
        self.table = Versions()
        self.operations: Counter = Counter()
        self._queries = TextVectors()

    def build(self, traces: Sequence[MemoryTrace], ctx: BuildContext) -> None:
        traces = in_order(traces)
        calls = 0
        # Extraction phase: it reads a trace and its context, never the memory, so it runs first and
        # the candidate facts of every trace are embedded in one batch.
        extracted: list[list[str]] = []
        for i, t in enumerate(traces):
            recent = [clip(p.content, RECENT_CHARS) for p in traces[max(0, i - RECENT_TRACES): i]]
            out = ctx.llm(stages.MEM0_EXTRACT.name, Mem0ExtractIn(
                trace_id=t.trace_id, medium=t.medium, event_date=t.event_date.isoformat(), content=t.content,
                recent=recent, language=ctx.language))
            calls += 1
            assert isinstance(out, Mem0Facts)
            extracted.append(unique(out.facts))
        vectors = TextVectors()
        vectors.add(f for facts in extracted for f in facts)

        # Update phase, in time order.
        table = self.table
        for t, facts in zip(traces, extracted):
            at = when(t.event_date)
            for fact in facts:
                similar = table.similar(vectors[fact], self.top_s)
                shown = {str(table.memory[v]): table.memory[v] for v, _ in similar}
                op = ctx.llm(stages.MEM0_UPDATE.name, Mem0UpdateIn(
                    fact=fact, event_date=t.event_date.isoformat(), language=ctx.language,
                    memories=[MemoryEntry(id=str(table.memory[v]), text=table.texts[v]) for v, _ in similar]))
                calls += 1
                assert isinstance(op, Mem0Operation)
                self._apply(op, fact, t.trace_id, at, shown, vectors)
        table.freeze()
        ctx.stats.update(
            llm_calls=calls, items=len(table), memories=table._next_memory, live=len(table.current),
            superseded=table.superseded(), operations=dict(self.operations), embedded=vectors.encoded,
        )

    def _apply(self, op: Mem0Operation, fact: str, trace_id: str, at: np.datetime64, shown: dict[str, int],
               vectors: TextVectors) -> None:
        table = self.table
        event = op.event
        target = shown.get(op.id or "")
        if event in ("UPDATE", "DELETE") and target is None:
            # An id that was not among the memories shown: an UPDATE still carries the new fact.
            self.operations["invalid_id"] += 1
            event = "ADD" if event == "UPDATE" else "NONE"
        self.operations[event] += 1
        if event == "ADD":
            text = (op.text or "").strip() or fact
            table.add(table.new_memory(), text, (trace_id,), at, vectors[text])
        elif event == "UPDATE":
            old = table.close(target, at)
            text = (op.text or "").strip()
            sources = tuple(dict.fromkeys([*table.sources[old], trace_id]))
            table.add(target, text, sources, at, vectors[text])
        elif event == "DELETE":
            table.close(target, at)

    def retrieve(self, question: QuestionView, k: int) -> list[Retrieved]:
        from clonemem.memory.embed import top_k

        table = self.table
        if not len(table) or k <= 0:
            return []
        scores = table.vectors @ self._queries[question.question]
        hits = top_k(scores, table.visible(when(question.question_time)), k)
        return [Retrieved(table.texts[i], table.sources[i], float(scores[i]), "fact") for i in hits]
