"""Stage IV results into the warehouse: accepted items as questions, everything else kept with its reason."""

from __future__ import annotations

import json
from collections.abc import Sequence

from clonemem.llm.types import CallRecord
from clonemem.qa.cues import CUE_ITEMS_SQL, tally_cues
from clonemem.qa.item import ItemResult
from clonemem.qa.segments import segment_row
from clonemem.schemas import question_types
from clonemem.schemas.config import DIMENSIONS
from clonemem.schemas.qa import Segment
from clonemem.schemas.results import CueStats
from clonemem.warehouse import Warehouse
from clonemem.warehouse.content import QA_TABLES, PersonaRows
from clonemem.warehouse.landing import Landing, PersonaLanding, land, rows_hash


def qa_rows(
    persona_id: str,
    benchmark_id: str,
    segments: list[Segment],
    results: list[ItemResult],
    arc_ids: dict[str, str],
) -> dict[str, list[dict]]:
    seg_by_id = {s.segment_id: s for s in segments}
    rows: dict[str, list[dict]] = {t: [] for t in QA_TABLES}
    rows["trajectory_segments"] = [segment_row(s, persona_id, arc_ids[s.arc.key]) for s in segments]
    seq = 0
    for r in results:
        if r.status == "infeasible":
            continue
        seg = seg_by_id[r.segment_id]
        for c in r.checks:
            rows["qa_checks"].append({"question_id": r.question_id, **c})
        for rd in r.rounds:
            rows["qa_distractor_rounds"].append(
                {"question_id": r.question_id, **{**rd, "choices": json.dumps(rd["choices"])}}
            )
        if r.status == "rejected":
            rows["qa_rejected"].append(
                {
                    "question_id": r.question_id,
                    "persona_id": persona_id,
                    "segment_id": r.segment_id,
                    "question_type": r.question_type,
                    "dimension": seg.arc.dimension,
                    "stage": r.rejected_stage,
                    "reason": r.rejected_reason or "",
                    "draft": json.dumps(
                        {"question": r.question, "answer": r.answer, "evidence_ids": r.evidence_ids}
                    ),
                }
            )
            continue
        plan = r.plan or r.privacy_plan
        rows["questions"].append(
            {
                "question_id": r.question_id,
                "benchmark_id": benchmark_id,
                "persona_id": persona_id,
                "external_id": r.question_id,
                "seq": seq,
                "question": r.question,
                "question_type": r.question_type,
                "question_type_known": r.question_type in question_types.names(),
                "dimension": seg.arc.dimension,
                "dimension_known": seg.arc.dimension in DIMENSIONS,
                "question_time": r.question_time,
                "answer": r.answer,
                "correct_choice_id": r.correct_choice_id,
                "arc_id": arc_ids[seg.arc.key],
                "segment_id": r.segment_id,
                "plan": plan.model_dump_json() if plan else None,
            }
        )
        seq += 1
        traces: list[str] = []
        evidence = {e.evidence_id: e for e in seg.evidence}
        for i, eid in enumerate(r.evidence_ids):
            rows["question_evidence"].append(
                {"question_id": r.question_id, "seq": i, "evidence_id": eid}
            )
            traces += [t for t in evidence[eid].trace_ids if t not in traces]
        rows["question_traces"] += [
            {"question_id": r.question_id, "seq": i, "trace_id": t} for i, t in enumerate(traces)
        ]
        if r.recipient is not None:  # a privacy task: who asks, why, and both sides of the boundary
            rows["privacy_items"].append(
                {
                    "question_id": r.question_id,
                    "recipient": r.recipient,
                    "purpose": r.purpose or "",
                    "tactic": r.tactic,
                }
            )
            rows["privacy_item_evidence"] += [
                {"question_id": r.question_id, "role": role, "seq": i, "evidence_id": eid}
                for role, ids in (("necessary", r.necessary_ids), ("sensitive", r.sensitive_ids))
                for i, eid in enumerate(ids)
            ]
        rows["question_choices"] += [
            {"question_id": r.question_id, "seq": i, "choice_id": c.id, "text": c.text}
            for i, c in enumerate(r.choices)
        ]
    return rows


def land_qa(
    wh: Warehouse,
    persona_id: str,
    benchmark_id: str,
    rows: dict[str, list[dict]],
    summary: dict,
    calls: Sequence[CallRecord] = (),
) -> bool:
    """A persona's stage-IV output, with the calls it paid for, in one transaction; False when unchanged."""
    return bool(
        land(
            wh,
            Landing(
                benchmark_id,
                "qa",
                [PersonaLanding(PersonaRows(persona_id, rows), rows_hash(rows), summary)],
                calls=calls,
                checkpoint="qa.landed",
            ),
        )
    )


def persona_ids(wh: Warehouse, benchmark_id: str) -> list[str]:
    return [
        pid
        for (pid,) in wh.rows(
            "SELECT persona_id FROM personas WHERE benchmark_id = ? ORDER BY seq", [benchmark_id]
        )
    ]


def arc_ids(wh: Warehouse, persona_id: str) -> dict[str, str]:
    """Arc key (A1, A2, ...) -> arc id."""
    return dict(
        wh.rows("SELECT 'A' || (seq + 1), arc_id FROM life_arcs WHERE persona_id = ?", [persona_id])
    )


def cue_stats(wh: Warehouse, benchmark_id: str) -> CueStats:
    """Superficial cues over accepted multiple-choice items: could length, word overlap with the
    question, or position predict the correct option? Chance is 25% among A–D."""
    items = wh.rows(CUE_ITEMS_SQL, [benchmark_id])
    letters: dict[str, int] = {}
    for _qid, _question, correct, _choices in items:
        letters[correct] = letters.get(correct, 0) + 1
    cues = tally_cues((question, correct, choices) for _qid, question, correct, choices in items)
    n = cues.items
    return CueStats(
        items=len(items),
        items_correct_in_a_to_d=n,
        longest_option_accuracy=round(cues.longest / n, 4) if n else None,
        overlap_option_accuracy=round(cues.overlap / n, 4) if n else None,
        correct_letter_distribution=dict(sorted(letters.items())),
    )
