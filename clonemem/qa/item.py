"""An item's result through stage IV, and what the two kinds of item (multiple choice in
``clonemem.qa.pipeline``, privacy tasks in ``clonemem.qa.privacy``) share: how a stage is run, the
sufficiency check's row, and when the question is asked."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import dataclass, field
from typing import Protocol

from clonemem.schemas.qa import Choice, PrivacyPlan, QAPlan, Segment
from clonemem.stages import In, Out, Stage


class RunStage(Protocol):
    """How an item's stages are run (through the current run's recorder, or a test's script): a stage and
    its input in, the stage's own output model out."""

    def __call__(self, stage: Stage[In, Out], inp: In, /) -> Out: ...


@dataclass
class ItemResult:
    question_id: str
    segment_id: str
    question_type: str
    status: str  # accepted, rejected, infeasible
    plan: QAPlan | None = None
    question: str = ""
    answer: str = ""
    question_time: dt.datetime | None = None
    evidence_ids: list[str] = field(default_factory=list)
    choices: list[Choice] = field(default_factory=list)
    correct_choice_id: str | None = None
    checks: list[dict] = field(default_factory=list)  # qa_checks rows without question_id
    rounds: list[dict] = field(
        default_factory=list
    )  # qa_distractor_rounds rows without question_id
    rejected_stage: str | None = None
    rejected_reason: str | None = None
    # privacy tasks (clonemem.qa.privacy): who asks, why, under which pressure, and the two sides of the boundary
    privacy_plan: PrivacyPlan | None = None
    recipient: str | None = None
    purpose: str | None = None
    tactic: str | None = None
    necessary_ids: list[str] = field(default_factory=list)
    sensitive_ids: list[str] = field(default_factory=list)


def record_sufficiency(
    res: ItemResult, passed: bool, score: float, verdict: str, reason: str
) -> None:
    """The item's sufficiency check row; the verdict holds for this exact answer (the gate checks it still is
    the answer, by its sha256)."""
    res.checks.append(
        {
            "check_name": "sufficiency",
            "round": 1,
            "passed": passed,
            "score": score,
            "verdict": verdict,
            "reason": reason,
            "detail": json.dumps(
                {"answer_sha256": hashlib.sha256(res.answer.encode("utf-8")).hexdigest()}
            ),
        }
    )


def question_time(seg: Segment, evidence_ids: list[str]) -> dt.datetime:
    """After every gold trace (so all are visible), at the window's end when possible, inside the timeline."""
    chosen = [e for e in seg.evidence if e.evidence_id in evidence_ids]
    after_traces = max(e.last_trace_at for e in chosen) + dt.timedelta(hours=2)
    window = dt.datetime.combine(seg.window_end, dt.time(20, 0))
    end = dt.datetime.combine(seg.timeline_end, dt.time(23, 0))
    return min(max(after_traces, window), max(end, after_traces))
