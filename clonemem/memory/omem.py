"""O-Mem (OPPO AI Agent Team, 2025): memory built by active user profiling.

Per interaction (trace), in time order, one LLM call per group of consecutive interactions
(``grouped.groups``) for each step:

* an LLM step extracts its topics t_i, the persona attributes a_i it reveals and the event facts e_i it
  records (eq. 1);
* working memory: the topic index M_t maps each topic to the interactions tagged with it; episodic
  memory: the clue index M_w maps each word of the interaction to the interactions containing it (eq. 2);
* persona memory: each attribute and each fact is routed ADD / IGNORE / UPDATE against the most similar
  existing entries by an LLM step (eqs. 3-4); attributes are grouped by greedy nearest-neighbour
  clustering on their embeddings (a new attribute joins the cluster of its nearest neighbour when the
  two are similar enough), a cluster standing for one aggregated attribute (eqs. 5-7).

Retrieval (sec. 3.3) runs the three channels and merges them with reciprocal rank fusion: persona
memory by dense similarity over facts and over attribute clusters (eq. 11); working memory through the
topics most similar to the query (eq. 8); episodic memory through the query's rarest clue word, the one
with the lowest document frequency in M_w (eqs. 9-10). Everything is timestamped, so each channel only
sees what existed at the question's time (document frequencies included); nothing is rebuilt per
question, and every channel is a few array operations (index lists are in time order, so "as of" is a
binary search), never a scan over all items in Python.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from clonemem import text as tx
from clonemem.memory import memsys_stages as stages
from clonemem.memory.base import BuildContext, MemoryTrace, QuestionView, Retrieved
from clonemem.memory.grouped import GROUP_SIZE, GroupedMemory, in_group_order, when
from clonemem.memory.mem0 import TextVectors, Versions, as_of_time, dot, unique, versions_at
from clonemem.schemas.memsys import (
    MemoryEntry,
    OMemExtractIn,
    OMemExtraction,
    OMemItem,
    OMemRouteIn,
)

TOP_S = 5  # existing entries shown to the routing step, per new item
CLUSTER_THRESHOLD = 0.75  # cosine above which a new attribute joins its nearest neighbour's cluster
TOPICS_PER_QUERY = 3
RRF_K = 60
CLUSTER_SHOWN = 5  # attributes of a cluster shown in one retrieved item
PREFIX = {"attribute": "a", "fact": "f"}  # ids of existing entries shown to the routing step


class OMem(GroupedMemory):
    name = "omem"
    llm_stages = (stages.OMEM_EXTRACT, stages.OMEM_ROUTE)

    def __init__(
        self,
        top_s: int = TOP_S,
        cluster_threshold: float = CLUSTER_THRESHOLD,
        topics_per_query: int = TOPICS_PER_QUERY,
        group_size: int = GROUP_SIZE,
    ) -> None:
        self.top_s = top_s
        self.cluster_threshold = cluster_threshold
        self.topics_per_query = topics_per_query
        self.group_size = group_size
        self._queries = TextVectors()

    # -- build ----------------------------------------------------------------------------------

    def build(self, traces: Sequence[MemoryTrace], ctx: BuildContext) -> None:
        parts = self._start(traces)
        traces = self.traces
        self.language = ctx.language
        self.routed: dict[str, int] = defaultdict(int)
        # Extraction reads only the interactions, so it runs first and its output is embedded in one batch.
        extracted = [
            e for part in self._through(parts, ctx, "extracting") for e in self._extract(part, ctx)
        ]
        vectors = TextVectors()
        vectors.add(
            [
                x
                for e in extracted
                for x in (*e.attributes, *e.facts, *(p.lower() for p in e.topics))
            ]
        )

        self.when = np.array([when(t.event_date) for t in traces], dtype="datetime64[us]")
        self._index(extracted)
        # Persona memory P_f and P_a, versioned; attribute memory -> cluster.
        self.facts = Versions()
        self.attributes = Versions()
        self.cluster: dict[int, int] = {}
        self._clusters = 0
        for part in self._through(parts, ctx, "routing"):
            self._route(part, extracted, vectors, ctx)
        self.facts.freeze()
        self.attributes.freeze()
        self._freeze_clusters()
        self.topic_vectors = vectors.matrix(self.topic_names)
        ctx.stats.update(
            llm_calls=self.calls,
            items=len(traces) + len(self.facts) + len(self.attributes),
            interactions=len(traces),
            fact_versions=len(self.facts),
            attribute_versions=len(self.attributes),
            clusters=self._clusters,
            topics=len(self.topic_names),
            clue_words=len(self.kw_items),
            operations=dict(self.routed),
            embedded=vectors.encoded,
            groups=len(parts),
        )

    def _extract(self, part: range, ctx: BuildContext) -> list[OMemExtraction]:
        out = self._step(
            ctx, stages.OMEM_EXTRACT, OMemExtractIn(traces=self._views(part), language=ctx.language)
        )
        found = []
        for j, e in enumerate(in_group_order(out.interactions, part)):
            if e is None:
                self.routed["invalid_interaction"] += 1
                e = OMemExtraction(id=f"t{j}")
            found.append(
                OMemExtraction(
                    id=e.id,
                    topics=unique(e.topics),
                    keywords=unique(e.keywords),
                    attributes=unique(e.attributes),
                    facts=unique(e.facts),
                )
            )
        return found

    def _index(self, extracted: list[OMemExtraction]) -> None:
        """Working memory M_t (topic -> interactions) and episodic memory M_w (word -> interactions),
        both lists in time order."""
        topic_ids: dict[str, int] = {}
        self.topic_names: list[str] = []
        members: list[list[int]] = []
        postings: dict[str, list[int]] = defaultdict(list)
        for i, (t, e) in enumerate(zip(self.traces, extracted)):
            for topic in e.topics:
                key = topic.lower()
                if key not in topic_ids:
                    topic_ids[key] = len(self.topic_names)
                    self.topic_names.append(key)
                    members.append([])
                members[topic_ids[key]].append(i)
            for w in set(tx.content_words(t.content)) | {
                w for k in e.keywords for w in tx.content_words(k)
            }:
                postings[w].append(i)
        self.topic_members = [np.array(m, dtype=np.int64) for m in members]
        self.topic_first = np.array([self.when[m[0]] for m in members], dtype="datetime64[us]")
        self.kw_items = {w: np.array(p, dtype=np.int64) for w, p in postings.items()}
        self.kw_when = {w: self.when[p] for w, p in self.kw_items.items()}

    def _route(
        self, part: range, extracted: list[OMemExtraction], vectors: TextVectors, ctx: BuildContext
    ) -> None:
        """Route one group's attributes and facts (one LLM call) and apply the routes in order."""
        items = [
            (i, kind, x)
            for i in part
            for kind, xs in (("attribute", extracted[i].attributes), ("fact", extracted[i].facts))
            for x in xs
        ]
        if not items:
            return
        tables = {"attribute": self.attributes, "fact": self.facts}
        vecs = vectors.matrix([x for _, _, x in items])
        shown: dict[str, list[int]] = {}
        nearest: dict[
            int, tuple[int, float] | None
        ] = {}  # attribute item -> nearest existing version
        for kind, table in tables.items():
            rows = [n for n, (_, k, _) in enumerate(items) if k == kind]
            similar = table.similar(vecs[rows], self.top_s)
            shown[kind] = list(dict.fromkeys(table.memory[v] for hits in similar for v, _ in hits))
            if kind == "attribute":
                nearest.update({n: (hits[0] if hits else None) for n, hits in zip(rows, similar)})
        out = self._step(
            ctx,
            stages.OMEM_ROUTE,
            OMemRouteIn(
                items=[
                    OMemItem(
                        id=f"i{n}", kind=k, text=x, event_date=self.traces[i].event_date.isoformat()
                    )
                    for n, (i, k, x) in enumerate(items)
                ],
                attributes=[
                    MemoryEntry(id=f"a{m}", text=self.attributes.texts[self.attributes.current[m]])
                    for m in shown["attribute"]
                ],
                facts=[
                    MemoryEntry(id=f"f{m}", text=self.facts.texts[self.facts.current[m]])
                    for m in shown["fact"]
                ],
                language=ctx.language,
            ),
        )
        vectors.add((r.text or "").strip() for r in out.routes if r.op == "UPDATE")
        ids = {f"{PREFIX[kind]}{m}": (kind, m) for kind in tables for m in shown[kind]}
        added: list[
            tuple[int, int]
        ] = []  # (row of ``vecs``, cluster) of the attributes this group ADDed
        done: set[int] = set()
        for route in out.routes:
            n = int(route.item[1:]) if route.item[:1] == "i" and route.item[1:].isdigit() else -1
            if not 0 <= n < len(items) or n in done:
                self.routed["invalid_item"] += 1
                continue
            done.add(n)
            i, kind, item = items[n]
            table, at, trace_id = tables[kind], self.when[i], self.traces[i].trace_id
            op = route.op
            target = ids.get(route.id or "")
            if op == "UPDATE" and (
                target is None or target[0] != kind or target[1] not in table.current
            ):
                self.routed["invalid_id"] += 1
                op = "ADD"
            self.routed[f"{kind}_{op}"] += 1
            if op == "ADD":
                memory = table.new_memory()
                if kind == "attribute":
                    self.cluster[memory] = self._cluster_for(vecs, n, nearest.get(n), added)
                    added.append((n, self.cluster[memory]))
                table.add(memory, item, (trace_id,), at, vecs[n])
                ids[route.item] = (kind, memory)
            elif op == "UPDATE":
                assert target is not None  # an UPDATE of an unknown id became an ADD above
                memory = target[1]
                at = max(at, table.started(memory))
                old = table.close(memory, at)
                text = (route.text or "").strip()
                table.add(
                    memory,
                    text,
                    tuple(dict.fromkeys([trace_id, *table.sources[old]])),
                    at,
                    vectors[text],
                )
        self.routed["unrouted"] += len(items) - len(done)

    def _cluster_for(
        self, vecs: np.ndarray, n: int, old: tuple[int, float] | None, added: list[tuple[int, int]]
    ) -> int:
        """Greedy nearest-neighbour clustering: join the nearest attribute's cluster if close enough. The
        candidates are the attributes before this group (the nearest was found for routing) and those
        this group added before item ``n``."""
        best = (old[1], self.cluster[self.attributes.memory[old[0]]]) if old else None
        if added:
            sims = dot(vecs[[row for row, _ in added]], vecs[n])
            j = int(np.argmax(sims))
            if best is None or sims[j] > best[0]:
                best = (float(sims[j]), added[j][1])
        if best is not None and best[0] >= self.cluster_threshold:
            return best[1]
        self._clusters += 1
        return self._clusters - 1

    def _freeze_clusters(self) -> None:
        table = self.attributes
        self.v_cluster = np.array([self.cluster[m] for m in table.memory], dtype=np.int64)
        members: list[list[int]] = [[] for _ in range(self._clusters)]
        for v, c in enumerate(self.v_cluster.tolist()):
            members[c].append(v)
        self.cluster_members = [np.array(m, dtype=np.int64) for m in members]

    # -- the three channels, as of a time ---------------------------------------------------------

    def clue(self, query: str, as_of: np.datetime64) -> tuple[str | None, np.ndarray]:
        """Episodic memory: the query's rarest clue word (lowest document frequency in M_w among the
        interactions visible at ``as_of``; ties go to the word said first) and its interactions."""
        best: tuple[int, int, str] | None = None
        for pos, w in enumerate(unique(tx.content_words(query))):
            times = self.kw_when.get(w)
            if times is None:
                continue
            df = int(np.searchsorted(times, as_of, side="right"))
            if df and (best is None or (df, pos) < best[:2]):
                best = (df, pos, w)
        if best is None:
            return None, np.zeros(0, dtype=np.int64)
        df, _, w = best
        return w, self.kw_items[w][:df]

    def topic_hits(self, qvec: np.ndarray, as_of: np.datetime64) -> tuple[np.ndarray, np.ndarray]:
        """Working memory: the interactions of the topics most similar to the query, and each one's
        topic rank (an interaction in two topics keeps its better rank)."""
        from clonemem.memory.embed import top_k

        found, ranks = [np.zeros(0, dtype=np.int64)], [np.zeros(0, dtype=np.int64)]
        if not self.topic_names:
            return found[0], ranks[0]
        for rank, topic in enumerate(
            top_k(dot(self.topic_vectors, qvec), self.topic_first <= as_of, self.topics_per_query)
        ):
            m = self.topic_members[topic]
            m = m[: int(np.searchsorted(self.when[m], as_of, side="right"))]
            found.append(m)
            ranks.append(np.full(m.size, rank, dtype=np.int64))
        items, item_ranks = np.concatenate(found), np.concatenate(ranks)
        first = np.unique(items, return_index=True)[
            1
        ]  # topics come best first: keep each item's first
        return items[first], item_ranks[first]

    def _overlap(self, query: str, as_of: np.datetime64) -> np.ndarray:
        """Per interaction, how many of the query's clue words it contains (among those visible)."""
        hits = [
            self.kw_items[w][: int(np.searchsorted(self.kw_when[w], as_of, side="right"))]
            for w in set(tx.content_words(query))
            if w in self.kw_items
        ]
        if not hits:
            return np.zeros(len(self.traces), dtype=np.int64)
        return np.bincount(np.concatenate(hits), minlength=len(self.traces))

    def _persona_rankings(
        self,
        qvec: np.ndarray,
        as_of: np.datetime64,
        depth: int,
        texts: dict[tuple[str, int], Retrieved],
    ) -> list[list[tuple[str, int]]]:
        """Persona memory: facts, and attribute clusters (a cluster ranks by its best visible member)."""
        from clonemem.memory.embed import top_k

        rankings = []
        if len(self.facts):
            scores = dot(self.facts.vectors, qvec)
            hits = top_k(scores, self.facts.visible(as_of), depth)
            rankings.append([("fact", v) for v in hits])
            for v in hits:
                texts[("fact", v)] = Retrieved(
                    self.facts.texts[v], self.facts.sources[v], float(scores[v]), "fact"
                )
        if len(self.attributes):
            table = self.attributes
            scores = dot(table.vectors, qvec)
            mask = table.visible(as_of)
            visible = np.flatnonzero(mask)
            if visible.size:
                best = np.full(self._clusters, -np.inf)
                np.maximum.at(best, self.v_cluster[visible], scores[visible])
                ranking = []
                for c in top_k(best, np.isfinite(best), depth):
                    m = self.cluster_members[c]
                    m = m[
                        mask[m]
                    ]  # versions in creation order, so a stable sort breaks ties by age
                    shown = m[np.argsort(-scores[m], kind="stable")[:CLUSTER_SHOWN]].tolist()
                    sources = tuple(dict.fromkeys(s for v in shown for s in table.sources[v]))
                    texts[("attribute", c)] = Retrieved(
                        "; ".join(table.texts[v] for v in shown),
                        sources,
                        float(scores[shown[0]]),
                        "attribute",
                    )
                    ranking.append(("attribute", c))
                rankings.append(ranking)
        return rankings

    def retrieve(self, question: QuestionView, k: int) -> list[Retrieved]:
        if not self.traces or k <= 0:
            return []
        as_of = when(question.question_time)
        qvec = self._queries[question.question]
        depth = max(2 * k, 20)
        texts: dict[tuple[str, int], Retrieved] = {}
        rankings = self._persona_rankings(qvec, as_of, depth, texts)

        # Working memory (topics) and episodic memory (the rarest clue word) return interactions, each
        # ordered by how many query words an interaction shares, then newest first.
        overlap = self._overlap(question.question, as_of)
        newest = -self.when.astype(np.int64)
        items, ranks = self.topic_hits(qvec, as_of)
        working = items[np.lexsort((items, newest[items], -overlap[items], ranks))]
        _, episodes = self.clue(question.question, as_of)
        episodic = episodes[np.lexsort((episodes, newest[episodes], -overlap[episodes]))]
        for ranking in (working[:depth].tolist(), episodic[:depth].tolist()):
            rankings.append([("trace", i) for i in ranking])
            for i in ranking:
                t = self.traces[i]
                texts.setdefault(("trace", i), Retrieved(t.content, (t.trace_id,), 0.0, "trace"))

        fused: dict[tuple[str, int], float] = defaultdict(float)
        for ranking in rankings:
            for r, key in enumerate(ranking):
                fused[key] += 1.0 / (RRF_K + r + 1)
        order = sorted(fused, key=lambda key: (-fused[key], key))[:k]
        return [
            Retrieved(texts[key].text, texts[key].trace_ids, fused[key], texts[key].kind)
            for key in order
        ]

    def stored(self, as_of: dt.datetime | None = None) -> list[Retrieved]:
        """Persona memory (event facts, then attributes) valid at ``as_of``, then the interactions the
        working and episodic memories index (O-Mem keeps the raw interactions there)."""
        t = as_of_time(as_of)
        held = (
            self.traces[: int(np.searchsorted(self.when, t, side="right"))] if self.traces else []
        )
        return [
            *versions_at(self.facts, as_of, "fact"),
            *versions_at(self.attributes, as_of, "attribute"),
            *(Retrieved(x.content, (x.trace_id,), 0.0, "trace") for x in held),
        ]
