"""What a stage-IV run did, tallied per persona: item outcomes by status, rejecting stage, type and
dimension, items that kept failing, and the calls made."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from clonemem.qa.item import ItemResult
from clonemem.schemas import question_types
from clonemem.schemas.qa import Segment
from clonemem.schemas.results import CueStats, FailedItem, FunnelRow, QAResult


def candidates(
    segments: list[Segment], types: Sequence[str], types_per_segment: int, quotas: dict[str, int]
) -> list[tuple[Segment, str]]:
    """Question types rotate over segments, so every type is tried on several segments and windows. A
    privacy family is tried on every segment whose window holds a sensitive item (only there can the
    persona's data support one), right after the segment's other types."""
    rotating = [t for t in types if not question_types.spec(t).privacy]
    per_segment = min(
        types_per_segment, len(rotating)
    )  # the config bounds it; a caller's own list may be shorter
    out = []
    for j, seg in enumerate(segments):
        wanted = (
            [rotating[(j * per_segment + t) % len(rotating)] for t in range(per_segment)]
            if rotating
            else []
        )
        if _holds_sensitive(seg):
            wanted += [t for t in types if question_types.spec(t).privacy]
        for qtype in wanted:
            if (
                quotas.get(qtype, 1) > 0
                and seg.arc.dimension in question_types.spec(qtype).dimensions
            ):
                out.append((seg, qtype))
    return out


def _holds_sensitive(seg: Segment) -> bool:
    new = set(seg.new_evidence_ids)
    return any(e.matters for e in seg.evidence if e.evidence_id in new)


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
    cached_items: int = 0
    funnel: Counter = field(default_factory=Counter)  # (type, dimension, outcome) -> items

    def failed(self, segment: Segment, qtype: str, error: BaseException) -> None:
        self.failed_items.append(
            FailedItem(segment=segment.segment_id, type=qtype, error=str(error))
        )
        self.funnel[(qtype, segment.arc.dimension, "failed")] += 1

    def add(self, segments: list[Segment], results: list[ItemResult]) -> None:
        dimension = {s.segment_id: s.arc.dimension for s in segments}
        for r in results:
            outcome = f"rejected_{r.rejected_stage}" if r.status == "rejected" else r.status
            self.funnel[(r.question_type, dimension[r.segment_id], outcome)] += 1
            self.status[r.status] += 1
            if r.status == "rejected":
                self.rejected_by[r.rejected_stage] += 1
            if r.status == "accepted":
                self.by_type[r.question_type] += 1
                self.by_dimension[dimension[r.segment_id]] += 1

    def count_calls(self, calls: Sequence, cached: bool = False) -> None:
        """Calls of one item; ``cached``: the item came from Prefect's cache (its calls are an earlier run's)."""
        self.llm_calls += sum(1 for c in calls if c.run_id == self.run_id)
        self.cached_items += cached

    def funnel_rows(self) -> tuple[FunnelRow, ...]:
        rows = []
        for qtype, dim in sorted({(t, d) for t, d, _ in self.funnel}):
            n = {o: c for (t, d, o), c in self.funnel.items() if (t, d) == (qtype, dim)}
            rejected = {
                k.removeprefix("rejected_"): v for k, v in n.items() if k.startswith("rejected_")
            }
            accepted = n.get("accepted", 0)
            rows.append(
                FunnelRow(
                    question_type=qtype,
                    dimension=dim,
                    candidates=sum(n.values()),
                    infeasible=n.get("infeasible", 0),
                    failed=n.get("failed", 0),
                    written=accepted + sum(rejected.values()),
                    rejected_format=rejected.get("format", 0),
                    rejected_sufficiency=rejected.get("sufficiency", 0),
                    rejected_distractors=rejected.get("distractors", 0),
                    accepted=accepted,
                )
            )
        return tuple(rows)

    def snapshot(self) -> dict:
        """The running tallies (kept beside each persona's landing)."""
        return {
            "benchmark_id": self.benchmark_id,
            "status": dict(self.status),
            "rejected_by": dict(self.rejected_by),
            "by_type": dict(self.by_type),
            "by_dimension": dict(self.by_dimension),
            "failed_items": [f.model_dump() for f in self.failed_items],
            "landed": self.landed,
        }

    def result(self, cues: CueStats, seconds: float) -> QAResult:
        written = self.status["accepted"] + self.status["rejected"]
        return QAResult(
            benchmark_id=self.benchmark_id,
            status=dict(self.status),
            rejected_by=dict(self.rejected_by),
            by_type=dict(self.by_type),
            by_dimension=dict(self.by_dimension),
            failed_items=tuple(self.failed_items),
            landed=self.landed,
            rejection_rate=round(self.status["rejected"] / written, 4) if written else None,
            cues=cues,
            llm_calls=self.llm_calls,
            funnel=self.funnel_rows(),
            cached_items=self.cached_items,
            seconds=round(seconds, 2),
        )
