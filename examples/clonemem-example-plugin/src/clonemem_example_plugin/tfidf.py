"""A flat TF-IDF retriever: cosine similarity of log-scaled term frequencies weighted by IDF.

Written against the public interface only (``clonemem.plugin``), as a third party would.
Time-awareness: traces are kept in time order, so "visible at the question's time" is a prefix of
the index, found by binary search; IDF is computed once over all traces (a fixed vocabulary
statistic, as a real index built ahead of time would have).
"""

from __future__ import annotations

import bisect
import math
import re
from collections import Counter, defaultdict
from collections.abc import Sequence

from clonemem.plugin import BuildContext, MemorySystem, MemoryTrace, QuestionView, Retrieved

_WORD = re.compile(r"\w+", re.UNICODE)


def terms(text: str) -> list[str]:
    words = _WORD.findall(text.lower())
    # CJK text has no spaces: index character bigrams of long runs so Chinese is searchable too.
    out = []
    for w in words:
        if any("\u4e00" <= ch <= "\u9fff" for ch in w) and len(w) > 1:
            out += [w[i : i + 2] for i in range(len(w) - 1)]
        else:
            out.append(w)
    return out


class TfidfMemory(MemorySystem):
    name = "tfidf"

    def build(self, traces: Sequence[MemoryTrace], ctx: BuildContext) -> None:
        self._traces = sorted(traces, key=lambda t: (t.event_date, t.trace_id))
        self._dates = [t.event_date for t in self._traces]
        counts = [Counter(terms(t.content)) for t in self._traces]
        df = Counter(term for c in counts for term in c)
        n = len(self._traces)
        self._idf = {term: math.log((1 + n) / (1 + d)) + 1.0 for term, d in df.items()}
        self._postings: dict[str, list[tuple[int, float]]] = defaultdict(list)
        for doc, c in enumerate(counts):
            weights = {term: (1.0 + math.log(tf)) * self._idf[term] for term, tf in c.items()}
            norm = math.sqrt(sum(w * w for w in weights.values())) or 1.0
            for term, w in weights.items():
                self._postings[term].append((doc, w / norm))
        ctx.stats["items"] = n

    def retrieve(self, question: QuestionView, k: int) -> list[Retrieved]:
        visible = bisect.bisect_right(self._dates, question.question_time)
        query = Counter(terms(question.question))
        scores: dict[int, float] = defaultdict(float)
        for term, tf in query.items():
            idf = self._idf.get(term)
            if idf is None:
                continue
            q = (1.0 + math.log(tf)) * idf
            for doc, w in self._postings[term]:
                if doc < visible:
                    scores[doc] += q * w
        ranked = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:k]
        return [
            Retrieved(self._traces[d].content, (self._traces[d].trace_id,), s) for d, s in ranked
        ]
