"""O-Mem (OPPO AI Agent Team, 2025): memory built by active user profiling.

Per interaction (trace), in time order:

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
sees what existed at the question's time (document frequencies included); nothing is rebuilt per question.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from clonemem import text as tx
from clonemem.memory import memsys_stages as stages
from clonemem.memory.base import BuildContext, MemorySystem, MemoryTrace, QuestionView, Retrieved
from clonemem.memory.mem0 import TextVectors, Versions, in_order, unique, when
from clonemem.schemas.memsys import MemoryEntry, OMemExtraction, OMemExtractIn, OMemRoute, OMemRouteIn

TOP_S = 5  # existing entries shown to the routing step
CLUSTER_THRESHOLD = 0.75  # cosine above which a new attribute joins its nearest neighbour's cluster
TOPICS_PER_QUERY = 3
RRF_K = 60
CLUSTER_SHOWN = 5  # attributes of a cluster shown in one retrieved item


class OMem(MemorySystem):
    name = "omem"
    llm_stages = (stages.OMEM_EXTRACT, stages.OMEM_ROUTE)

    def __init__(self, top_s: int = TOP_S, cluster_threshold: float = CLUSTER_THRESHOLD,
                 topics_per_query: int = TOPICS_PER_QUERY) -> None:
        self.top_s = top_s
        self.cluster_threshold = cluster_threshold
        self.topics_per_query = topics_per_query
        self._queries = TextVectors()

    # -- build ----------------------------------------------------------------------------------

    def build(self, traces: Sequence[MemoryTrace], ctx: BuildContext) -> None:
        traces = in_order(traces)
        self.traces = traces
        self.language = ctx.language
        calls = 0
        # Extraction reads only the interaction, so it runs first and its output is embedded in one batch.
        extracted: list[OMemExtraction] = []
        for t in traces:
            out = ctx.llm(stages.OMEM_EXTRACT.name, OMemExtractIn(
                trace_id=t.trace_id, medium=t.medium, event_date=t.event_date.isoformat(), content=t.content,
                language=ctx.language))
            calls += 1
            assert isinstance(out, OMemExtraction)
            extracted.append(OMemExtraction(topics=unique(out.topics), keywords=unique(out.keywords),
                                            attributes=unique(out.attributes), facts=unique(out.facts)))
        vectors = TextVectors()
        vectors.add([x for e in extracted for x in (*e.attributes, *e.facts, *(p.lower() for p in e.topics))])

        self.when = np.array([when(t.event_date) for t in traces], dtype="datetime64[us]")
        self.trace_words: list[set[str]] = []
        # Working memory M_t: topic -> [(since, interaction)]; episodic memory M_w: word -> interactions.
        topic_ids: dict[str, int] = {}
        self.topic_names: list[str] = []
        self.topic_members: list[list[int]] = []
        self.kw_when: dict[str, list[np.datetime64]] = defaultdict(list)
        self.kw_items: dict[str, list[int]] = defaultdict(list)
        # Persona memory P_f and P_a, versioned; attribute memory -> cluster.
        self.facts = Versions()
        self.attributes = Versions()
        self.cluster: dict[int, int] = {}
        self._clusters = 0
        routed: dict[str, int] = defaultdict(int)

        for i, (t, e) in enumerate(zip(traces, extracted)):
            at = self.when[i]
            for topic in e.topics:
                key = topic.lower()
                if key not in topic_ids:
                    topic_ids[key] = len(self.topic_names)
                    self.topic_names.append(key)
                    self.topic_members.append([])
                self.topic_members[topic_ids[key]].append(i)
            words = set(tx.content_words(t.content)) | {w for k in e.keywords for w in tx.content_words(k)}
            self.trace_words.append(words)
            for w in words:
                self.kw_when[w].append(at)
                self.kw_items[w].append(i)
            for kind, items, table in (("attribute", e.attributes, self.attributes), ("fact", e.facts, self.facts)):
                for item in items:
                    vec = vectors[item]
                    similar = table.similar(vec, self.top_s)
                    shown = {str(table.memory[v]): table.memory[v] for v, _ in similar}
                    route = ctx.llm(stages.OMEM_ROUTE.name, OMemRouteIn(
                        kind=kind, item=item, event_date=t.event_date.isoformat(), language=ctx.language,
                        existing=[MemoryEntry(id=str(table.memory[v]), text=table.texts[v]) for v, _ in similar]))
                    calls += 1
                    assert isinstance(route, OMemRoute)
                    op = route.op
                    if op == "UPDATE" and (route.id or "") not in shown:
                        routed["invalid_id"] += 1
                        op = "ADD"
                    routed[f"{kind}_{op}"] += 1
                    if op == "ADD":
                        memory = table.new_memory()
                        if kind == "attribute":
                            self.cluster[memory] = self._cluster_for(vec, similar)
                        table.add(memory, item, (t.trace_id,), at, vec)
                    elif op == "UPDATE":
                        target = shown[route.id or ""]
                        old = table.close(target, at)
                        text = (route.text or "").strip()
                        sources = tuple(dict.fromkeys([*table.sources[old], t.trace_id]))
                        table.add(target, text, sources, at, vectors[text])

        self.facts.freeze()
        self.attributes.freeze()
        self.topic_first = np.array([self.when[m[0]] for m in self.topic_members], dtype="datetime64[us]")
        self.topic_vectors = (np.stack([vectors[name] for name in self.topic_names]) if self.topic_names
                              else np.zeros((0, 384), dtype=np.float32))
        ctx.stats.update(
            llm_calls=calls, items=len(traces) + len(self.facts) + len(self.attributes),
            interactions=len(traces), fact_versions=len(self.facts), attribute_versions=len(self.attributes),
            clusters=self._clusters, topics=len(self.topic_names), clue_words=len(self.kw_items),
            operations=dict(routed), embedded=vectors.encoded,
        )

    def _cluster_for(self, vec: np.ndarray, similar: list[tuple[int, float]]) -> int:
        """Greedy nearest-neighbour clustering: join the nearest attribute's cluster if close enough."""
        if similar and similar[0][1] >= self.cluster_threshold:
            return self.cluster[self.attributes.memory[similar[0][0]]]
        self._clusters += 1
        return self._clusters - 1

    # -- the three channels, as of a time ---------------------------------------------------------

    def clue(self, query: str, as_of: np.datetime64) -> tuple[str | None, list[int]]:
        """Episodic memory: the query's rarest clue word (lowest document frequency in M_w among the
        interactions visible at ``as_of``; ties go to the word said first) and its interactions."""
        best: tuple[int, int, str] | None = None
        for pos, w in enumerate(unique(tx.content_words(query))):
            times = self.kw_when.get(w)
            if not times:
                continue
            df = bisect.bisect_right(times, as_of)
            if df and (best is None or (df, pos) < best[:2]):
                best = (df, pos, w)
        if best is None:
            return None, []
        df, _, w = best
        return w, self.kw_items[w][:df]

    def topic_hits(self, qvec: np.ndarray, as_of: np.datetime64) -> list[tuple[int, int]]:
        """Working memory: (topic rank, interaction) for the topics most similar to the query."""
        from clonemem.memory.embed import top_k

        if not self.topic_names:
            return []
        scores = self.topic_vectors @ qvec
        out = []
        for rank, topic in enumerate(top_k(scores, self.topic_first <= as_of, self.topics_per_query)):
            out += [(rank, i) for i in self.topic_members[topic] if self.when[i] <= as_of]
        return out

    def retrieve(self, question: QuestionView, k: int) -> list[Retrieved]:
        from clonemem.memory.embed import top_k

        if not self.traces or k <= 0:
            return []
        as_of = when(question.question_time)
        qvec = self._queries[question.question]
        qwords = set(tx.content_words(question.question))
        depth = max(2 * k, 20)
        texts: dict[tuple[str, int], Retrieved] = {}
        rankings: list[list[tuple[str, int]]] = []

        # Persona memory: facts, and attribute clusters (a cluster ranks by its best visible member).
        if len(self.facts):
            scores = self.facts.vectors @ qvec
            hits = top_k(scores, self.facts.visible(as_of), depth)
            rankings.append([("fact", v) for v in hits])
            for v in hits:
                texts[("fact", v)] = Retrieved(self.facts.texts[v], self.facts.sources[v], float(scores[v]), "fact")
        if len(self.attributes):
            table = self.attributes
            scores = table.vectors @ qvec
            visible = table.visible(as_of)
            members: dict[int, list[int]] = {}
            for v in top_k(scores, visible, int(visible.sum())):
                members.setdefault(self.cluster[table.memory[v]], []).append(v)
            ranking = []
            for c, vs in list(members.items())[:depth]:
                shown = vs[:CLUSTER_SHOWN]
                sources = tuple(dict.fromkeys(s for v in shown for s in table.sources[v]))
                texts[("attribute", c)] = Retrieved("; ".join(table.texts[v] for v in shown), sources,
                                                    float(scores[shown[0]]), "attribute")
                ranking.append(("attribute", c))
            rankings.append(ranking)

        # Working memory (topics) and episodic memory (the rarest clue word) return interactions.
        def overlap(i: int) -> int:
            return len(qwords & self.trace_words[i])

        best_rank: dict[int, int] = {}
        for rank, i in self.topic_hits(qvec, as_of):
            best_rank.setdefault(i, rank)
        working = sorted(best_rank, key=lambda i: (best_rank[i], -overlap(i), -self.when[i].astype(np.int64), i))
        _, episodes = self.clue(question.question, as_of)
        episodic = sorted(episodes, key=lambda i: (-overlap(i), -self.when[i].astype(np.int64), i))
        for ranking in (working[:depth], episodic[:depth]):
            rankings.append([("trace", i) for i in ranking])
            for i in ranking:
                t = self.traces[i]
                texts.setdefault(("trace", i), Retrieved(t.content, (t.trace_id,), 0.0, "trace"))

        fused: dict[tuple[str, int], float] = defaultdict(float)
        for ranking in rankings:
            for r, key in enumerate(ranking):
                fused[key] += 1.0 / (RRF_K + r + 1)
        order = sorted(fused, key=lambda key: (-fused[key], key))[:k]
        return [Retrieved(texts[key].text, texts[key].trace_ids, fused[key], texts[key].kind) for key in order]
