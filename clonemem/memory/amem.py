"""A-Mem (Xu et al., 2025): an agentic, Zettelkasten-style memory of linked, evolving notes.

Per trace, in time order: (1) *note construction*: an LLM step writes the note's keywords K, context X
and tags G; the content c is the trace itself and the note is embedded from c, K and G;
(2) *link generation*: the n nearest existing notes are retrieved by embedding and an LLM step decides
which of them to connect to; (3) *memory evolution*: an LLM step refreshes the context and tags of
those neighbours in the light of the new note. Each step runs once per group of consecutive traces
(``grouped.groups``: one session's or one day's traces), for every note of the group in order; a
note's neighbours include the earlier notes of its own group, and are shown as they were before the
group (later updates inside the group are the model's own, see the offline handler).

Evolution is stored as note versions: each version records when it became valid (the date of the
trace that caused it) and when it was replaced, so a question sees every note as it was at its own
time, and links only once both ends exist. Each version is embedded from its own content, keywords
and tags; while building, neighbours are found with the notes' embeddings at creation (as A-Mem's
index, which its implementation only refreshes on consolidation). The evolution step runs for the
notes linked to at least one neighbour.

Retrieval (k items): cosine similarity over the visible note versions; the best ceil(k/2) hits, then
the visible notes linked to them (one hop, links that existed at the question's time, closest first),
then the next hits until k items.
"""

from __future__ import annotations

import bisect
import datetime as dt
import math
from collections.abc import Sequence

import numpy as np

from clonemem.memory import memsys_stages as stages
from clonemem.memory.base import BuildContext, MemoryTrace, QuestionView, Retrieved
from clonemem.memory.grouped import GROUP_SIZE, GroupedMemory, in_group_order, when
from clonemem.memory.mem0 import NEVER, TextVectors, as_of_time, dot, unique
from clonemem.schemas.memsys import (
    AMemEvolveIn,
    AMemEvolveItem,
    AMemLinksIn,
    AMemNeighbourhood,
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


def nearest(sims: np.ndarray, n: int) -> list[int]:
    """Indices of the n largest values, best first; ties go to the older (smaller) index."""
    if sims.size <= n:
        part = np.arange(sims.size)
    else:
        part = np.argpartition(-sims, n - 1)[:n]
    return sorted(part.tolist(), key=lambda j: (-sims[j], j))


class AMem(GroupedMemory):
    name = "amem"
    llm_stages = (stages.AMEM_NOTE, stages.AMEM_LINKS, stages.AMEM_EVOLVE)

    def __init__(self, top_n: int = TOP_N, group_size: int = GROUP_SIZE) -> None:
        self.top_n = top_n
        self.group_size = group_size
        self._queries = TextVectors()

    # -- build ----------------------------------------------------------------------------------

    def build(self, traces: Sequence[MemoryTrace], ctx: BuildContext) -> None:
        parts = self._start(traces)
        traces = self.traces
        self.counts = {"links": 0, "evolutions": 0, "invalid": 0}
        # Note construction reads only the traces, so every note is written first and embedded in one batch.
        self.notes = [
            note
            for part in self._through(parts, ctx, "writing notes")
            for note in self._construct(part, ctx)
        ]
        vectors = TextVectors()
        created = vectors.matrix(
            [embed_text(t.content, n.keywords, n.tags) for t, n in zip(traces, self.notes)]
        )

        # Versions: (note, context, tags, start, end); a note's current version is the last of its list.
        self.v_note: list[int] = []
        self.v_context: list[str] = []
        self.v_tags: list[list[str]] = []
        self.v_start: list[np.datetime64] = []
        self.v_end: list[np.datetime64] = []
        self.versions: list[list[int]] = []  # note -> its version indices, oldest first
        self.links: list[list[tuple[np.datetime64, int]]] = [
            [] for _ in traces
        ]  # note -> (since, other), in time order
        for part in self._through(parts, ctx, "linking and evolving"):
            for i in part:
                self._new_version(
                    i, self.notes[i].context, self.notes[i].tags, when(traces[i].event_date)
                )
            self._link_and_evolve(part, created, ctx)

        # Each version is embedded from its own content, keywords and tags; evolved versions are
        # embedded in one batch at the end. Versions with the same text (a context-only change) share
        # a row, so a query scores each distinct vector once.
        texts = [
            embed_text(traces[n].content, self.notes[n].keywords, tags)
            for n, tags in zip(self.v_note, self.v_tags)
        ]
        distinct = list(dict.fromkeys(texts))
        row = {t: r for r, t in enumerate(distinct)}
        self.vectors = vectors.matrix(distinct)
        self.row_of = np.array(
            [row[t] for t in texts], dtype=np.int64
        )  # version -> row of ``vectors``
        self._freeze()
        ctx.stats.update(
            llm_calls=self.calls,
            items=len(traces),
            versions=len(self.v_note),
            groups=len(parts),
            embedded=vectors.encoded,
            **self.counts,
        )

    def _construct(self, part: range, ctx: BuildContext) -> list[AMemNote]:
        out = self._step(
            ctx, stages.AMEM_NOTE, AMemNoteIn(traces=self._views(part), language=ctx.language)
        )
        notes = []
        for j, (i, got) in enumerate(zip(part, in_group_order(out.notes, part))):
            if got is None:  # the reply skipped this trace: an empty note still holds its content
                self.counts["invalid"] += 1
                got = AMemNote(id=f"t{j}", context=self.traces[i].medium)
            notes.append(
                AMemNote(
                    id=str(i),
                    keywords=unique(got.keywords),
                    context=" ".join(got.context.split()) or self.traces[i].medium,
                    tags=unique(got.tags),
                )
            )
        return notes

    def _link_and_evolve(self, part: range, created: np.ndarray, ctx: BuildContext) -> None:
        """Link generation and memory evolution for one group's notes (one LLM call each)."""
        first = max(part.start, 1)  # the very first note has no neighbours
        if first >= part.stop:
            return
        sims = dot(created[: part.stop], created[first : part.stop])
        neighbours = {i: nearest(sims[:i, i - first], self.top_n) for i in range(first, part.stop)}
        views = {j: self._view(j) for i in neighbours for j in (i, *neighbours[i])}
        out = self._step(
            ctx,
            stages.AMEM_LINKS,
            AMemLinksIn(
                language=ctx.language,
                items=[
                    AMemNeighbourhood(note=views[i], neighbours=[views[j] for j in near])
                    for i, near in neighbours.items()
                ],
            ),
        )
        linked: dict[int, list[int]] = {}
        for link_set in out.links:
            i = int(link_set.note) if link_set.note.isdigit() else -1
            if i not in neighbours or i in linked:
                self.counts["invalid"] += 1
                continue
            shown = {str(j) for j in neighbours[i]}
            linked[i] = [int(x) for x in unique(link_set.links) if x in shown]
            at = self.v_start[self.versions[i][0]]
            for j in linked[i]:
                self.links[i].append((at, j))
                self.links[j].append((at, i))
            self.counts["links"] += len(linked[i])
        evolving = [i for i in sorted(linked) if linked[i]]
        if not evolving:
            return
        evo = self._step(
            ctx,
            stages.AMEM_EVOLVE,
            AMemEvolveIn(
                language=ctx.language,
                items=[
                    AMemEvolveItem(
                        note=views[i],
                        neighbours=[views[j] for j in neighbours[i]],
                        linked=[str(j) for j in linked[i]],
                    )
                    for i in evolving
                ],
            ),
        )
        for upd in evo.updates:
            i = int(upd.note) if upd.note.isdigit() else -1
            if i not in linked or upd.id not in {str(j) for j in neighbours[i]}:
                self.counts["invalid"] += 1
                continue
            j = int(upd.id)
            cur = self.versions[j][-1]
            tags = unique(upd.tags)
            context = " ".join(upd.context.split()) or self.v_context[cur]
            if context == self.v_context[cur] and tags == self.v_tags[cur]:
                continue
            at = max(
                self.v_start[self.versions[i][0]], self.v_start[cur]
            )  # valid from the new note's date
            self.v_end[cur] = at
            self._new_version(j, context, tags, at)
            self.counts["evolutions"] += 1

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

    def _view(self, note: int) -> AMemNoteView:
        v = self.versions[note][-1]
        t = self.traces[note]
        return AMemNoteView(
            id=str(note),
            timestamp=t.event_date.isoformat(),
            content=t.content,
            keywords=self.notes[note].keywords,
            context=self.v_context[v],
            tags=self.v_tags[v],
        )

    def _freeze(self) -> None:
        """Arrays for retrieval: version validity, the note of each version, links by time."""
        self.start = np.array(self.v_start, dtype="datetime64[us]")
        self.end = np.array(self.v_end, dtype="datetime64[us]")
        self.note_of = np.array(self.v_note, dtype=np.int64)
        self._starts = [[self.v_start[v].astype(np.int64) for v in vs] for vs in self.versions]
        self._link_since = [
            np.array([s for s, _ in ls], dtype="datetime64[us]") for ls in self.links
        ]
        self._link_other = [np.array([o for _, o in ls], dtype=np.int64) for ls in self.links]
        self._rendered = [
            self._render(v) for v in range(len(self.v_note))
        ]  # stored() lists thousands per call

    # -- as of a time -----------------------------------------------------------------------------

    def version_at(self, note: int, as_of: np.datetime64) -> int | None:
        """The note's version visible at ``as_of`` (None before the note exists)."""
        pos = (
            bisect.bisect_right(self._starts[note], as_of.astype("datetime64[us]").astype(np.int64))
            - 1
        )
        if pos < 0:
            return None
        v = self.versions[note][pos]
        return v if self.v_start[v] <= as_of < self.v_end[v] else None

    def linked_at(self, note: int, as_of: np.datetime64) -> list[int]:
        n = int(np.searchsorted(self._link_since[note], as_of, side="right"))
        return self._link_other[note][:n].tolist()

    def render(self, v: int) -> str:
        """A note version as the answerer reads it: content, context, keywords, tags."""
        return self._rendered[v]

    def _render(self, v: int) -> str:
        note = self.v_note[v]
        kw = ", ".join(self.notes[note].keywords)
        return (
            f"{self.traces[note].content}\nContext: {self.v_context[v]}\nKeywords: {kw}\n"
            f"Tags: {', '.join(self.v_tags[v])}"
        )

    def retrieve(self, question: QuestionView, k: int) -> list[Retrieved]:
        from clonemem.memory.embed import top_k

        if not self.v_note or k <= 0:
            return []
        as_of = when(question.question_time)
        scores = dot(self.vectors, self._queries[question.question])[self.row_of]
        visible = (self.start <= as_of) & (self.end > as_of)
        hits = top_k(scores, visible, k)
        primary = hits[: max(1, math.ceil(k / 2))]
        chosen: list[int] = list(primary)
        taken = {self.v_note[v] for v in chosen}
        if primary:
            # each note's visible version, for the one hop along the links that existed at as_of
            shown = np.full(len(self.traces), -1, dtype=np.int64)
            vis = np.flatnonzero(visible)
            shown[self.note_of[vis]] = vis
        for v in primary:
            if len(chosen) >= k:
                break
            others = self._link_other[self.v_note[v]][
                : int(np.searchsorted(self._link_since[self.v_note[v]], as_of, side="right"))
            ]
            near = {int(w) for w in shown[others] if w >= 0 and self.v_note[w] not in taken}
            for w in sorted(near, key=lambda w: (-scores[w], w)):
                if len(chosen) >= k:
                    break
                chosen.append(w)
                taken.add(self.v_note[w])
        for v in hits[len(primary) :]:
            if len(chosen) >= k:
                break
            if self.v_note[v] not in taken:
                chosen.append(v)
                taken.add(self.v_note[v])
        return [
            Retrieved(
                self.render(v), (self.traces[self.v_note[v]].trace_id,), float(scores[v]), "note"
            )
            for v in chosen
        ]

    def stored(self, as_of: dt.datetime | None = None) -> list[Retrieved]:
        """The note versions valid at ``as_of``, one per note that exists then, each with its trace."""
        if not self.v_note:
            return []
        t = as_of_time(as_of)
        return [
            Retrieved(self.render(int(v)), (self.traces[self.v_note[v]].trace_id,), 0.0, "note")
            for v in np.flatnonzero((self.start <= t) & (self.end > t))
        ]
