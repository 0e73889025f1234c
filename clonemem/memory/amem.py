"""A-Mem (Xu et al., 2025): an agentic, Zettelkasten-style memory of linked, evolving notes.

Per trace, in time order: (1) *note construction*: an LLM step writes the note's keywords K, context X
and tags G; the content c is the trace itself and the note is embedded from c, K and G;
(2) *link generation*: the n nearest existing notes are retrieved by embedding and an LLM step decides
which of them to connect to; (3) *memory evolution*: an LLM step refreshes the context and tags of
those neighbours in the light of the new note.

Evolution is stored as note versions: each version records when it became valid (the date of the
trace that caused it) and when it was replaced, so a question sees every note as it was at its own
time, and links only once both ends exist. Each version is embedded from its own content, keywords
and tags; while building, neighbours are found with the notes' embeddings at creation (as A-Mem's
index, which its implementation only refreshes on consolidation). The evolution step runs when the
new note was linked to at least one neighbour.

Retrieval (k items): cosine similarity over the visible note versions; the best ceil(k/2) hits, then
the visible notes linked to them (one hop, links that existed at the question's time, closest first),
then the next hits until k items.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from clonemem.memory import memsys_stages as stages
from clonemem.memory.base import BuildContext, MemorySystem, MemoryTrace, QuestionView, Retrieved
from clonemem.memory.mem0 import NEVER, TextVectors, in_order, unique, when
from clonemem.schemas.memsys import (
    AMemEvolution,
    AMemEvolveIn,
    AMemLinks,
    AMemLinksIn,
    AMemNote,
    AMemNoteIn,
    AMemNoteView,
)

TOP_N = 5  # nearest notes considered for links and evolution (A-Mem's default k for evolution)


def embed_text(content: str, keywords: Sequence[str], tags: Sequence[str]) -> str:
    """What a note version is embedded from: its keywords, tags and content. The paper concatenates
    content first; the short fields go first here so the embedding window (``embed.MAX_SEQ_LENGTH``
    tokens) never cuts them off a long trace."""
    return f"Keywords: {', '.join(keywords)}\nTags: {', '.join(tags)}\n{content}"


class AMem(MemorySystem):
    name = "amem"
    llm_stages = (stages.AMEM_NOTE, stages.AMEM_LINKS, stages.AMEM_EVOLVE)

    def __init__(self, top_n: int = TOP_N) -> None:
        self.top_n = top_n
        self._queries = TextVectors()

    # -- build ----------------------------------------------------------------------------------

    def build(self, traces: Sequence[MemoryTrace], ctx: BuildContext) -> None:
        traces = in_order(traces)
        self.traces = traces
        calls = 0
        # Note construction reads only the trace, so every note is written first and embedded in one batch.
        notes: list[AMemNote] = []
        for t in traces:
            out = ctx.llm(stages.AMEM_NOTE.name, AMemNoteIn(
                trace_id=t.trace_id, medium=t.medium, event_date=t.event_date.isoformat(), content=t.content,
                language=ctx.language))
            calls += 1
            assert isinstance(out, AMemNote)
            notes.append(AMemNote(keywords=unique(out.keywords), context=" ".join(out.context.split()) or t.medium,
                                  tags=unique(out.tags)))
        vectors = TextVectors()
        vectors.add(embed_text(t.content, n.keywords, n.tags) for t, n in zip(traces, notes))
        created = np.stack([vectors[embed_text(t.content, n.keywords, n.tags)] for t, n in zip(traces, notes)]) \
            if traces else np.zeros((0, 384), dtype=np.float32)

        self.notes = notes
        # Versions: (note, context, tags, start); a note's current version is the last of its list.
        self.v_note: list[int] = []
        self.v_context: list[str] = []
        self.v_tags: list[list[str]] = []
        self.v_start: list[np.datetime64] = []
        self.v_end: list[np.datetime64] = []
        self.versions: list[list[int]] = []  # note -> its version indices, oldest first
        self.links: list[list[tuple[np.datetime64, int]]] = [[] for _ in traces]  # note -> (since, other note)
        link_count = evolutions = 0

        for i, (t, note) in enumerate(zip(traces, notes)):
            at = when(t.event_date)
            self._new_version(i, note.context, note.tags, at)
            if i == 0:
                continue
            sims = created[:i] @ created[i]
            order = [int(j) for j in np.argsort(-sims, kind="stable")[: self.top_n]]
            neighbours = [self._view(j) for j in order]
            me = self._view(i)
            out = ctx.llm(stages.AMEM_LINKS.name, AMemLinksIn(note=me, neighbours=neighbours, language=ctx.language))
            calls += 1
            assert isinstance(out, AMemLinks)
            shown = {str(j) for j in order}
            linked = [int(x) for x in unique(out.links) if x in shown]
            for j in linked:
                self.links[i].append((at, j))
                self.links[j].append((at, i))
            link_count += len(linked)
            if not linked:
                continue
            evo = ctx.llm(stages.AMEM_EVOLVE.name, AMemEvolveIn(
                note=me, neighbours=neighbours, linked=[str(j) for j in linked], language=ctx.language))
            calls += 1
            assert isinstance(evo, AMemEvolution)
            for upd in evo.updates:
                if upd.id not in shown:
                    continue
                j = int(upd.id)
                cur = self.versions[j][-1]
                tags = unique(upd.tags)
                context = " ".join(upd.context.split()) or self.v_context[cur]
                if context == self.v_context[cur] and tags == self.v_tags[cur]:
                    continue
                self.v_end[cur] = at
                self._new_version(j, context, tags, at)
                evolutions += 1

        # Each version is embedded from its own content, keywords and tags (a context-only change
        # keeps the vector); evolved versions are embedded in one batch at the end.
        texts = [embed_text(traces[n].content, notes[n].keywords, tags) for n, tags in zip(self.v_note, self.v_tags)]
        vectors.add(texts)
        self.vectors = np.stack([vectors[x] for x in texts]) if texts else np.zeros((0, 384), dtype=np.float32)
        self.start = np.array(self.v_start, dtype="datetime64[us]")
        self.end = np.array(self.v_end, dtype="datetime64[us]")
        ctx.stats.update(llm_calls=calls, items=len(traces), versions=len(self.v_note), links=link_count,
                         evolutions=evolutions, embedded=vectors.encoded)

    def _new_version(self, note: int, context: str, tags: list[str], at: np.datetime64) -> int:
        v = len(self.v_note)
        self.v_note.append(note)
        self.v_context.append(context)
        self.v_tags.append(list(tags))
        self.v_start.append(at)
        self.v_end.append(NEVER)
        if note == len(self.versions):
            self.versions.append([])
        self.versions[note].append(v)
        return v

    def _view(self, note: int, version: int | None = None) -> AMemNoteView:
        v = self.versions[note][-1] if version is None else version
        t = self.traces[note]
        return AMemNoteView(id=str(note), timestamp=t.event_date.isoformat(), content=t.content,
                            keywords=self.notes[note].keywords, context=self.v_context[v], tags=self.v_tags[v])

    # -- as of a time -----------------------------------------------------------------------------

    def version_at(self, note: int, as_of: np.datetime64) -> int | None:
        """The note's version visible at ``as_of`` (None before the note exists)."""
        for v in reversed(self.versions[note]):
            if self.v_start[v] <= as_of < self.v_end[v]:
                return v
        return None

    def linked_at(self, note: int, as_of: np.datetime64) -> list[int]:
        return [other for since, other in self.links[note] if since <= as_of]

    def render(self, v: int) -> str:
        note = self.v_note[v]
        kw = ", ".join(self.notes[note].keywords)
        return (f"{self.traces[note].content}\nContext: {self.v_context[v]}\nKeywords: {kw}\n"
                f"Tags: {', '.join(self.v_tags[v])}")

    def retrieve(self, question: QuestionView, k: int) -> list[Retrieved]:
        from clonemem.memory.embed import top_k

        if not self.v_note or k <= 0:
            return []
        as_of = when(question.question_time)
        scores = self.vectors @ self._queries[question.question]
        visible = (self.start <= as_of) & (self.end > as_of)
        hits = top_k(scores, visible, k)
        primary = hits[: max(1, math.ceil(k / 2))]
        chosen: list[int] = list(primary)
        taken = {self.v_note[v] for v in chosen}
        for v in primary:  # one hop along the links that existed at as_of
            if len(chosen) >= k:
                break
            near = []
            for other in self.linked_at(self.v_note[v], as_of):
                w = self.version_at(other, as_of)
                if w is not None and other not in taken:
                    near.append(w)
            for w in sorted(set(near), key=lambda w: (-scores[w], w)):
                if len(chosen) >= k:
                    break
                chosen.append(w)
                taken.add(self.v_note[w])
        for v in hits[len(primary):]:
            if len(chosen) >= k:
                break
            if self.v_note[v] not in taken:
                chosen.append(v)
                taken.add(self.v_note[v])
        return [Retrieved(self.render(v), (self.traces[self.v_note[v]].trace_id,), float(scores[v]), "note")
                for v in chosen]
