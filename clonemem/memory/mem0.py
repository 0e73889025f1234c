"""Mem0 (Chhikara et al., 2025): fact-based consolidation.

Two phases, over groups of consecutive traces in time order (a conversation session or a day's traces,
at most ``GROUP_SIZE``; Mem0's implementation likewise takes a batch of messages per ``add``).
*Extraction*: an LLM step distils the group (with the few traces before it as context, Mem0's recent
messages) into candidate facts, each naming its trace. *Update*: the s most similar existing memories
of every fact are retrieved by embedding, and an LLM step decides, fact by fact, one operation: ADD a
new memory, UPDATE a memory (new text), DELETE a contradicted memory, or NONE; each operation names
the facts it comes from.

Consolidation is kept as versions so questions can be answered "as of" their time without a rebuild:
every memory version records when it became valid (the date of the latest trace among its facts),
when it was superseded or deleted, and the traces it came from, newest first (an UPDATE keeps the old
sources after the new ones: a memory updated many times lists first the traces its current text
comes from, so a retrieved item's first trace ids are the ones it states). A group never spans two days, so what one call sees ahead of a trace is at most
that day's later traces, and no version becomes valid before the trace it comes from. Retrieval
scores the versions valid at the question's time by cosine similarity.

This module also holds the small pieces the other consolidating systems share: the versioned vector
table and the batched text-embedding cache (grouping, and the build's LLM steps, are in
:mod:`clonemem.memory.grouped`).
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np

from clonemem.memory import memsys_stages as stages
from clonemem.memory.base import BuildContext, MemoryTrace, QuestionView, Retrieved
from clonemem.memory.grouped import GROUP_SIZE, GroupedMemory, when
from clonemem.schemas.memsys import (
    Mem0ExtractIn,
    Mem0Facts,
    Mem0Operation,
    Mem0UpdateIn,
    MemoryEntry,
    NewFact,
)

NEVER = np.datetime64("9999-12-31T00:00:00", "us")
RECENT_TRACES = 2  # context for extraction (Mem0 uses the m most recent messages)
RECENT_CHARS = 300
TOP_S = 10  # similar memories shown per fact to the update step (Mem0: s = 10)


# -- shared helpers -------------------------------------------------------------------------------


def as_of_time(as_of: dt.datetime | None) -> np.datetime64:
    """``stored``'s time: None means after everything (the memory at the end)."""
    return NEVER - np.timedelta64(1, "us") if as_of is None else when(as_of)


def unique(items: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for item in items:
        item = " ".join(str(item).split())
        if item and item.lower() not in seen:
            seen.add(item.lower())
            out.append(item)
    return out


def clip(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 3].rstrip() + "..."


def dot(matrix: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """``matrix @ vectors.T`` (one score per row, or a column per vector) on one thread. numpy's
    OpenBLAS splits these products across threads, and on two busy cores the hand-off costs far more
    than it saves (measured: 6-14 ms for 2k-12k rows against 0.3-2.8 ms with einsum)."""
    if vectors.ndim == 1:
        return np.einsum("ij,j->i", matrix, vectors)
    return np.einsum("ij,kj->ik", matrix, vectors)


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

    def matrix(self, texts: Sequence[str]) -> np.ndarray:
        """One row per text (embedding the missing ones in one batch)."""
        self.add(texts)
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([self._cache[t] for t in texts])


class Versions:
    """An append-only table of memory versions: text, sources, validity interval, vector.

    A version is visible at ``as_of`` when ``start <= as_of < end``; the current version of a live
    memory has ``end = NEVER``. Live versions are flagged in place, so finding the memories most
    similar to new items is one matrix product over the table, with no copy."""

    def __init__(self) -> None:
        self.memory: list[int] = []
        self.texts: list[str] = []
        self.sources: list[tuple[str, ...]] = []
        self._start: list[np.datetime64] = []
        self._end: list[np.datetime64] = []
        self._vecs: np.ndarray | None = None
        self._alive = np.zeros(0, dtype=bool)
        self.current: dict[int, int] = {}  # live memory -> its current version
        self._next_memory = 0

    def __len__(self) -> int:
        return len(self.texts)

    def new_memory(self) -> int:
        self._next_memory += 1
        return self._next_memory - 1

    def add(
        self,
        memory: int,
        text: str,
        sources: tuple[str, ...],
        start: np.datetime64,
        vec: np.ndarray,
    ) -> int:
        i = len(self.texts)
        if self._vecs is None:
            self._vecs = np.zeros((64, vec.shape[0]), dtype=np.float32)
            self._alive = np.zeros(64, dtype=bool)
        if i == self._vecs.shape[0]:
            self._vecs = np.concatenate([self._vecs, np.zeros_like(self._vecs)])
            self._alive = np.concatenate([self._alive, np.zeros_like(self._alive)])
        self._vecs[i] = vec
        self._alive[i] = True
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
        self._alive[i] = False
        return i

    def started(self, memory: int) -> np.datetime64:
        return self._start[self.current[memory]]

    @property
    def vectors(self) -> np.ndarray:
        return (
            self._vecs[: len(self.texts)]
            if self._vecs is not None
            else np.zeros((0, 0), dtype=np.float32)
        )

    def similar(self, queries: np.ndarray, s: int) -> list[list[tuple[int, float]]]:
        """For each query row, the s current versions most similar to it (version, cosine), best
        first; ties go to the older version."""
        n = len(self.texts)
        if not self.current or not len(queries):
            return [[] for _ in range(len(queries))]
        assert self._vecs is not None  # a current version has a vector
        sims = dot(self._vecs[:n], queries)
        sims[~self._alive[:n]] = -np.inf
        s = min(s, len(self.current))
        out = []
        for col in sims.T:
            part = np.argpartition(-col, s - 1)[:s] if s < n else np.arange(n)
            part = part[np.isfinite(col[part])]
            order = sorted(part.tolist(), key=lambda v: (-col[v], v))
            out.append([(v, float(col[v])) for v in order])
        return out

    def freeze(self) -> None:
        self.start = np.array(self._start, dtype="datetime64[us]")
        self.end = np.array(self._end, dtype="datetime64[us]")

    def visible(self, as_of: np.datetime64) -> np.ndarray:
        return (self.start <= as_of) & (self.end > as_of)

    def superseded(self) -> int:
        return sum(1 for e in self._end if e != NEVER)


def versions_at(table: Versions, as_of: dt.datetime | None, kind: str) -> list[Retrieved]:
    """A frozen table's versions valid at ``as_of``, in creation order (``stored``)."""
    if not len(table):
        return []
    return [
        Retrieved(table.texts[i], table.sources[i], 0.0, kind)
        for i in np.flatnonzero(table.visible(as_of_time(as_of)))
    ]


# -- Mem0 ---------------------------------------------------------------------------------------------


class Mem0(GroupedMemory):
    name = "mem0"
    llm_stages = (stages.MEM0_EXTRACT, stages.MEM0_UPDATE)

    def __init__(self, top_s: int = TOP_S, group_size: int = GROUP_SIZE) -> None:
        self.top_s = top_s
        self.group_size = group_size
        self.table = Versions()
        self.operations: Counter = Counter()
        self._queries = TextVectors()

    def build(self, traces: Sequence[MemoryTrace], ctx: BuildContext) -> None:
        parts = self._start(traces)
        traces = self.traces
        # Extraction phase: it reads traces and their context, never the memory, so it runs first and
        # the candidate facts of every group are embedded in one batch.
        extracted: list[list[tuple[int, str]]] = []  # per group: (trace index, fact)
        for part in self._through(parts, ctx, "extracting facts"):
            recent = [
                clip(p.content, RECENT_CHARS)
                for p in traces[max(0, part.start - RECENT_TRACES) : part.start]
            ]
            out = self._step(
                ctx,
                stages.MEM0_EXTRACT,
                Mem0ExtractIn(traces=self._views(part), recent=recent, language=ctx.language),
            )
            extracted.append(self._facts(out, part))
        vectors = TextVectors()
        vectors.add(f for facts in extracted for _, f in facts)

        # Update phase, group by group in time order.
        for _, facts in zip(self._through(parts, ctx, "updating the memory"), extracted):
            if not facts:
                continue
            similar = self.table.similar(vectors.matrix([f for _, f in facts]), self.top_s)
            shown = list(dict.fromkeys(self.table.memory[v] for hits in similar for v, _ in hits))
            ops = self._step(
                ctx,
                stages.MEM0_UPDATE,
                Mem0UpdateIn(
                    facts=[
                        NewFact(id=f"f{n}", text=f, event_date=traces[i].event_date.isoformat())
                        for n, (i, f) in enumerate(facts)
                    ],
                    memories=[
                        MemoryEntry(id=str(m), text=self.table.texts[self.table.current[m]])
                        for m in shown
                    ],
                    language=ctx.language,
                ),
            )
            vectors.add(
                (op.text or "").strip() for op in ops.operations if op.event in ("ADD", "UPDATE")
            )
            self._apply(
                ops.operations,
                [(traces[i], f) for i, f in facts],
                {str(m): m for m in shown},
                vectors,
            )
        self.table.freeze()
        table = self.table
        ctx.stats.update(
            llm_calls=self.calls,
            items=len(table),
            memories=table._next_memory,
            live=len(table.current),
            superseded=table.superseded(),
            operations=dict(self.operations),
            embedded=vectors.encoded,
            groups=len(parts),
            facts=sum(len(f) for f in extracted),
        )

    def _facts(self, out: Mem0Facts, part: range) -> list[tuple[int, str]]:
        """The group's facts as (trace index, text), each once per trace, in trace order."""
        by_trace: dict[int, list[str]] = {}
        for fact in out.facts:
            j = int(fact.trace[1:]) if fact.trace[:1] == "t" and fact.trace[1:].isdigit() else -1
            if 0 <= j < len(part):
                by_trace.setdefault(part[j], []).append(fact.text)
            else:
                self.operations["invalid_trace"] += 1
        return [(i, f) for i in sorted(by_trace) for f in unique(by_trace[i])]

    def _apply(
        self,
        ops: list[Mem0Operation],
        facts: list[tuple[MemoryTrace, str]],
        ids: dict[str, int],
        vectors: TextVectors,
    ) -> None:
        """Apply one reply's operations in order. ``ids`` maps the ids shown (and those the reply ADDs)
        to memories; each change is valid from the date of the latest trace among its facts."""
        table = self.table
        for op in ops:
            sources = [
                facts[int(f[1:])][0]
                for f in dict.fromkeys(op.facts)
                if f[:1] == "f" and f[1:].isdigit() and int(f[1:]) < len(facts)
            ]
            event = op.event
            if event == "NONE":
                self.operations["NONE"] += 1
                continue
            if not sources:  # a change that names no fact of this group has no provenance
                self.operations["invalid_facts"] += 1
                continue
            at = max(when(t.event_date) for t in sources)
            trace_ids = tuple(
                dict.fromkeys(
                    t.trace_id
                    for t in sorted(sources, key=lambda t: when(t.event_date), reverse=True)
                )
            )
            target = ids.get(op.id or "")
            if event in ("UPDATE", "DELETE") and (target is None or target not in table.current):
                # An id that was not shown (or is gone): an UPDATE still carries the new fact.
                self.operations["invalid_id"] += 1
                event = "ADD" if event == "UPDATE" else "NONE"
            self.operations[event] += 1
            text = (op.text or "").strip()
            if event == "ADD":
                memory = table.new_memory()
                table.add(memory, text, trace_ids, at, vectors[text])
                if op.id and op.id not in ids:
                    ids[op.id] = memory
            elif event == "UPDATE":
                assert target is not None  # an UPDATE of an unknown id became an ADD above
                at = max(at, table.started(target))
                old = table.close(target, at)
                table.add(
                    target,
                    text,
                    tuple(dict.fromkeys([*trace_ids, *table.sources[old]])),
                    at,
                    vectors[text],
                )
            elif event == "DELETE":
                assert target is not None  # a DELETE of an unknown id became NONE above
                table.close(target, max(at, table.started(target)))

    def retrieve(self, question: QuestionView, k: int) -> list[Retrieved]:
        from clonemem.memory.embed import top_k

        table = self.table
        if not len(table) or k <= 0:
            return []
        scores = dot(table.vectors, self._queries[question.question])
        hits = top_k(scores, table.visible(when(question.question_time)), k)
        return [Retrieved(table.texts[i], table.sources[i], float(scores[i]), "fact") for i in hits]

    def stored(self, as_of: dt.datetime | None = None) -> list[Retrieved]:
        """The memory versions valid at ``as_of``: each fact with the traces it was built from."""
        return versions_at(self.table, as_of, "fact")
