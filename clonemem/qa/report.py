"""What a stage-IV run did, tallied per persona: item outcomes by status, rejecting stage, type and
dimension, items that kept failing, and the calls made."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from clonemem.qa.pipeline import ItemResult
from clonemem.schemas.qa import Segment
from clonemem.schemas.results import CueStats, FailedItem, QAResult


def candidates(segments: list[Segment], types: Sequence[str], types_per_segment: int,
               quotas: dict[str, int]) -> list[tuple[Segment, str]]:
    """Question types rotate over segments, so every type is tried on several segments and windows."""
    out = []
    for j, seg in enumerate(segments):
        for t in range(types_per_segment):
            qtype = types[(j * types_per_segment + t) % len(types)]
            if quotas.get(qtype, 1) > 0:
                out.append((seg, qtype))
    return out


def cap_per_persona(results: list[ItemResult], cap: int) -> list[ItemResult]:
    """At most ``cap`` accepted items per persona (the first ones, in candidate order)."""
    kept, accepted = [], 0
    for r in results:
        if r.status == "accepted":
            if accepted >= cap:
                continue
            accepted += 1
        kept.append(r)
    return kept


@dataclass
class QATally:
    benchmark_id: str
    run_id: str
    status: Counter = field(default_factory=Counter)
    rejected_by: Counter = field(default_factory=Counter)
    by_type: Counter = field(default_factory=Counter)
    by_dimension: Counter = field(default_factory=Counter)
    failed_items: list[FailedItem] = field(default_factory=list)
    landed: int = 0
    llm_calls: int = 0

    def failed(self, segment: Segment, qtype: str, error: BaseException) -> None:
        self.failed_items.append(FailedItem(segment=segment.segment_id, type=qtype, error=str(error)))

    def add(self, segments: list[Segment], results: list[ItemResult]) -> None:
        dimension = {s.segment_id: s.arc.dimension for s in segments}
        for r in results:
            self.status[r.status] += 1
            if r.status == "rejected":
                self.rejected_by[r.rejected_stage] += 1
            if r.status == "accepted":
                self.by_type[r.question_type] += 1
                self.by_dimension[dimension[r.segment_id]] += 1

    def count_calls(self, calls: Sequence) -> None:
        self.llm_calls += sum(1 for c in calls if c.run_id == self.run_id)  # not those a cached result carries

    def snapshot(self) -> dict:
        """The running tallies (kept beside each persona's landing)."""
        return {"benchmark_id": self.benchmark_id, "status": dict(self.status), "rejected_by": dict(self.rejected_by),
                "by_type": dict(self.by_type), "by_dimension": dict(self.by_dimension),
                "failed_items": [f.model_dump() for f in self.failed_items], "landed": self.landed}

    def result(self, cues: CueStats, seconds: float) -> QAResult:
        written = self.status["accepted"] + self.status["rejected"]
        return QAResult(benchmark_id=self.benchmark_id, status=dict(self.status), rejected_by=dict(self.rejected_by),
                        by_type=dict(self.by_type), by_dimension=dict(self.by_dimension),
                        failed_items=tuple(self.failed_items), landed=self.landed,
                        rejection_rate=round(self.status["rejected"] / written, 4) if written else None,
                        cues=cues, llm_calls=self.llm_calls, seconds=round(seconds, 2))
