"""One privacy task through stage IV (contextual disclosure, boundary defense): plan (recipient, purpose,
necessary and sensitive items) → write (the request, a reference response) → quality control: the items'
grounding before the question, the boundary (every sensitive item really outside the recipient's scope,
every necessary item inside it), a reference response that discloses nothing sensitive, and the
validator's sufficiency verdict on the necessary items. No options: these tasks are scored for violation
and completeness (clonemem.evaluation), not by a choice."""

from __future__ import annotations

import json
from typing import cast

from clonemem import privacy
from clonemem.ids import content_id, stable_int
from clonemem.qa import stages as Q
from clonemem.qa.item import ItemResult, RunStage, question_time, record_sufficiency
from clonemem.schemas.qa import (
    PrivacyPlanInput,
    PrivacyWriteInput,
    Segment,
    SegmentEvidence,
    SufficiencyInput,
    Tactic,
)
from clonemem.schemas.question_types import spec as type_spec


def tactic_for(seg: Segment, qtype: str) -> Tactic | None:
    """The pressure a boundary-defense request applies, rotating over segments (deterministic)."""
    if not type_spec(qtype).adversarial:
        return None
    return cast(
        Tactic, privacy.TACTICS[stable_int(seg.segment_id, qtype, "tactic") % len(privacy.TACTICS)]
    )


def boundary_problems(
    recipient: str, necessary: list[SegmentEvidence], sensitive: list[SegmentEvidence], seg: Segment
) -> list[str]:
    """What breaks the boundary the task claims: a sensitive item the recipient may know or was told, a
    necessary item outside their scope."""
    out = [
        f"sensitive item {e.evidence_id} is within {recipient}'s scope (may know it, or was told)"
        for e in sensitive
        if not privacy.outside_scope(recipient, e.matters, e.disclosed_to, seg.privacy)
    ]
    out += [
        f"necessary item {e.evidence_id} is outside {recipient}'s scope"
        for e in necessary
        if privacy.outside_scope(recipient, e.matters, e.disclosed_to, seg.privacy)
    ]
    return out


def _check(res: ItemResult, name: str, problems: list[str], detail: dict | None = None) -> bool:
    res.checks.append(
        {
            "check_name": name,
            "round": 1,
            "passed": not problems,
            "score": None,
            "verdict": "ok" if not problems else "failed",
            "reason": "; ".join(problems) or None,
            "detail": json.dumps(detail) if detail else None,
        }
    )
    return not problems


def run_privacy_item(seg: Segment, qtype: str, run: RunStage) -> ItemResult:
    qid = content_id(seg.segment_id, "qa", qtype)
    kind = type_spec(qtype)
    tactic = tactic_for(seg, qtype)
    res = ItemResult(
        question_id=qid,
        segment_id=seg.segment_id,
        question_type=qtype,
        status="infeasible",
        tactic=tactic,
    )
    plan = run(Q.PRIVACY_PLAN, PrivacyPlanInput(segment=seg, question_type=qtype, tactic=tactic))
    res.privacy_plan = plan
    if not plan.feasible:
        return res
    known = {e.evidence_id: e for e in seg.evidence}
    res.recipient, res.purpose = plan.recipient.strip(), plan.purpose.strip()
    res.necessary_ids = [i for i in dict.fromkeys(plan.necessary_ids) if i in known]
    res.sensitive_ids = [
        i for i in dict.fromkeys(plan.sensitive_ids) if i in known and i not in res.necessary_ids
    ]
    res.evidence_ids = res.necessary_ids + res.sensitive_ids
    problems = [
        p
        for p, bad in (
            (
                "the recipient is not one of the persona's relations",
                res.recipient not in {r.name for r in seg.relations},
            ),
            ("no purpose", not res.purpose),
            ("no sensitive item of this segment", not res.sensitive_ids),
            ("no necessary item of this segment", not kind.adversarial and not res.necessary_ids),
            (
                f"a {qtype} task needs at least {kind.min_evidence} items; the plan cites {len(res.evidence_ids)}",
                len(res.evidence_ids) < kind.min_evidence,
            ),
        )
        if bad
    ]
    if not _check(res, "format", problems):
        return _reject(res, "format", "; ".join(problems))
    necessary = [known[i] for i in res.necessary_ids]
    sensitive = [known[i] for i in res.sensitive_ids]
    if not _check(
        res, "privacy_boundary", boundary_problems(res.recipient, necessary, sensitive, seg)
    ):
        return _reject(res, "privacy_boundary", res.checks[-1]["reason"])
    res.question_time = question_time(seg, res.evidence_ids)
    draft = run(
        Q.PRIVACY_WRITE,
        PrivacyWriteInput(
            segment=seg,
            question_type=qtype,
            plan=plan,
            tactic=tactic,
            question_time=res.question_time,
            necessary=[e.statement for e in necessary],
            sensitive=[e.statement for e in sensitive],
        ),
    )
    res.question, res.answer = draft.request.strip(), draft.response.strip()
    # what a sensitive item adds beyond the necessary ones (a feeling about a shareable fact restates the fact)
    skip = [seg.persona.name, *(e.statement for e in necessary)]
    # the reference response must itself respect the boundary, and the request must not spell out a secret
    leaks = [
        f"the reference response discloses {e.evidence_id}"
        for e in sensitive
        if privacy.coverage(res.answer, e.statement, skip) >= privacy.CONVEYED
    ]
    leaks += [
        f"the request quotes {e.evidence_id}"
        for e in sensitive
        if privacy.coverage(res.question, e.statement, skip) >= privacy.CONVEYED
    ]
    late = [
        f"item {e.evidence_id} was written after the question"
        for e in necessary + sensitive
        if e.last_trace_at >= res.question_time
    ]
    empty = [
        p
        for p, bad in (("empty request", not res.question), ("empty response", not res.answer))
        if bad
    ]
    if not _check(res, "privacy_reference", empty + leaks + late):
        return _reject(res, "format", res.checks[-1]["reason"])
    if (
        not necessary
    ):  # boundary defense: nothing is to be conveyed; the items are grounded before the question
        record_sufficiency(
            res,
            True,
            1.0,
            "sufficient",
            "boundary defense: every requested item is recorded before the question",
        )
    else:  # the reference response conveys the necessary items and says nothing they do not support
        verdict = run(
            Q.SUFFICIENCY,
            SufficiencyInput(
                question=res.question,
                answer=res.answer,
                question_type=qtype,
                evidence=[e.statement for e in necessary],
                persona_name=seg.persona.name,
                language=seg.language,
            ),
        )
        ok = verdict.verdict == "sufficient"
        record_sufficiency(res, ok, verdict.score, verdict.verdict, verdict.reason)
        if not ok:
            return _reject(res, "sufficiency", verdict.reason)
    res.status = "accepted"
    return res


def _reject(res: ItemResult, stage: str, reason: str) -> ItemResult:
    res.status, res.rejected_stage, res.rejected_reason = "rejected", stage, reason
    return res
