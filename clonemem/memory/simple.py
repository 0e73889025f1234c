"""Reference points: the oracle (gold traces, or gold statements), full context, and a random control."""

from __future__ import annotations

import bisect
import datetime as dt
import random
from collections.abc import Sequence

from clonemem.ids import stable_int
from clonemem.memory.base import BuildContext, MemorySystem, MemoryTrace, QuestionView, Retrieved
from clonemem.text import words


class _Traces(MemorySystem):
    exact_as_of = True  # each retrieval reads the visible traces alone

    def build(self, traces: Sequence[MemoryTrace], ctx: BuildContext) -> None:
        self.traces = sorted(traces, key=lambda t: (t.event_date, t.trace_id))
        self.by_id = {t.trace_id: t for t in self.traces}
        self.seed = ctx.seed
        self._held_items: dict[
            int, tuple[Retrieved, ...]
        ] = {}  # stored() per cut, until the next build
        ctx.stats.update(items=len(self.traces), llm_calls=0)

    def visible(self, q: QuestionView) -> list[MemoryTrace]:
        return [t for t in self.traces if t.event_date <= q.question_time]

    def stored(self, as_of: dt.datetime | None = None) -> list[Retrieved]:
        """The traces held, in time order (each system here keeps every trace; the oracles pick gold
        ones per question, but what they index is all of them)."""
        cut = (
            len(self.traces)
            if as_of is None
            else bisect.bisect_right(self.traces, as_of, key=lambda t: t.event_date)
        )
        return list(self._held(cut))

    def _held(self, cut: int) -> tuple[Retrieved, ...]:
        """The first ``cut`` traces as items, made once per cut (questions asked at one time share it)."""
        if cut not in self._held_items:
            self._held_items[cut] = tuple(
                Retrieved(t.content, (t.trace_id,), 0.0) for t in self.traces[:cut]
            )
        return self._held_items[cut]


class Oracle(_Traces):
    """The question's gold traces (an upper bound for retrieval)."""

    name = "oracle"

    def retrieve(self, question: QuestionView, k: int) -> list[Retrieved]:
        return [
            Retrieved(self.by_id[t].content, (t,), 1.0)
            for t in question.gold_trace_ids
            if t in self.by_id
        ][:k]


class OracleStatements(_Traces):
    """The gold evidence statements themselves, each carrying its traces."""

    name = "oracle_statements"

    def retrieve(self, question: QuestionView, k: int) -> list[Retrieved]:
        return [Retrieved(s, ids, 1.0, "statement") for s, ids in question.gold_statements][:k]


class FullContext(_Traces):
    """Every visible trace, newest first, cut to a token budget (k does not apply)."""

    name = "full_context"
    ignores_k = True

    def build(self, traces: Sequence[MemoryTrace], ctx: BuildContext) -> None:
        super().build(traces, ctx)
        self.budget = ctx.full_context_tokens  # the run's configured budget

    def retrieve(self, question: QuestionView, k: int) -> list[Retrieved]:
        out, used = [], 0
        for t in reversed(self.visible(question)):
            cost = len(words(t.content)) + 4
            if used + cost > self.budget:
                break
            used += cost
            out.append(Retrieved(t.content, (t.trace_id,), 0.0))
        return out


class RandomControl(_Traces):
    """k visible traces drawn at random (seeded per question): the floor a benchmark must clear."""

    name = "random"

    def retrieve(self, question: QuestionView, k: int) -> list[Retrieved]:
        pool = self.visible(question)
        rng = random.Random(stable_int(self.seed, "random", question.question_id))
        return [
            Retrieved(t.content, (t.trace_id,), 0.0) for t in rng.sample(pool, min(k, len(pool)))
        ]
