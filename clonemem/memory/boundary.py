"""A boundary-aware baseline: BM25 that, for a privacy task, retrieves only from traces whose audience
included the recipient (a message to them, or something posted for everyone; clonemem/privacy.py).
What the persona never told the asker cannot be retrieved for them, so it cannot leak, and whatever
the asker needs but was never told cannot be conveyed either: beside plain BM25 it measures the tension
between violation and completeness. Questions to the persona itself (no recipient) are unfiltered."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from clonemem import privacy
from clonemem.memory.base import BuildContext, MemoryTrace, QuestionView
from clonemem.memory.flat import BM25


class BM25Boundary(BM25):
    name = "bm25_boundary"
    protocol_features = ("recipient",)

    def build(self, traces: Sequence[MemoryTrace], ctx: BuildContext) -> None:
        super().build(traces, ctx)
        reached = {t.trace_id: t.reached for t in traces}
        self.reached = [reached.get(u.trace_id, ()) for u in self.units]

    def visible(self, question: QuestionView) -> np.ndarray:
        mask = super().visible(question)
        if question.recipient is None:
            return mask
        told = np.fromiter(
            (privacy.reaches(question.recipient, r) for r in self.reached),
            dtype=bool,
            count=len(self.reached),
        )
        return mask & told
