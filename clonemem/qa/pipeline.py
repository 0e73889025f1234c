"""One candidate item through stage IV: plan → write → format check → evidence sufficiency →
multiple-choice conversion with distractor validation (regenerated up to a bounded number of rounds).
Every verdict and every round is kept, accepted or not."""

from __future__ import annotations

import json
import random

from clonemem.ids import content_id, stable_int
from clonemem.qa import stages as Q
from clonemem.qa.item import ItemResult, RunStage, question_time, record_sufficiency
from clonemem.qa.privacy import run_privacy_item
from clonemem.schemas.config import QuestionType
from clonemem.schemas.qa import (
    E_TEXT,
    Choice,
    ChoiceAttempt,
    ChoiceInput,
    DistractorInput,
    PlanInput,
    Segment,
    SufficiencyInput,
    WriteInput,
)
from clonemem.schemas.question_types import spec as type_spec

LETTERS = "ABCD"
# A validator that picks the correct option with at least this confidence has solved the item (from the
# question and options alone, or from one evidence item): the distractors failed.
CONFIDENT = 0.6


def shuffle_choices(
    question_id: str, rnd: int, answer: str, wrong: list[str], correct_is_e: bool
) -> tuple[list[Choice], str]:
    """A–D shuffled deterministically, E fixed; for abstaining (unanswerable) items E is correct."""
    texts = list(wrong[:4]) if correct_is_e else [answer, *wrong[:3]]
    order = list(range(4))
    random.Random(stable_int(question_id, "choices", rnd)).shuffle(order)
    choices = [Choice(id=LETTERS[i], text=texts[j]) for i, j in enumerate(order)]
    choices.append(Choice(id="E", text=E_TEXT))
    correct = "E" if correct_is_e else LETTERS[order.index(0)]
    return choices, correct


def run_item(seg: Segment, qtype: QuestionType, rounds: int, run: RunStage) -> ItemResult:
    kind = type_spec(qtype)
    if kind.privacy:  # no options: its own stages and checks
        return run_privacy_item(seg, qtype, run)
    qid = content_id(seg.segment_id, "qa", qtype)
    res = ItemResult(
        question_id=qid, segment_id=seg.segment_id, question_type=qtype, status="infeasible"
    )
    plan = run(Q.PLAN, PlanInput(segment=seg, question_type=qtype))
    res.plan = plan
    if not plan.feasible:
        return res
    known = {e.evidence_id: e for e in seg.evidence}
    res.evidence_ids = [i for i in plan.evidence_ids if i in known]
    if not res.evidence_ids:
        return _reject(res, "format", "the plan names no evidence of this segment")
    if len(res.evidence_ids) < kind.min_evidence:
        return _reject(
            res,
            "format",
            f"a {qtype} question needs at least {kind.min_evidence} evidence items; "
            f"the plan cites {len(res.evidence_ids)}",
        )
    res.question_time = question_time(seg, res.evidence_ids)
    draft = run(
        Q.WRITE,
        WriteInput(segment=seg, question_type=qtype, plan=plan, question_time=res.question_time),
    )
    res.question, res.answer = draft.question.strip(), draft.answer.strip()
    problems = [
        p
        for p, bad in (
            ("empty question", not res.question),
            ("empty answer", not res.answer),
            ("evidence names no trace", any(not known[i].trace_ids for i in res.evidence_ids)),
        )
        if bad
    ]
    res.checks.append(
        {
            "check_name": "format",
            "round": 1,
            "passed": not problems,
            "score": None,
            "verdict": "ok" if not problems else "malformed",
            "reason": "; ".join(problems) or None,
            "detail": None,
        }
    )
    if problems:
        return _reject(res, "format", "; ".join(problems))
    statements = [known[i].statement for i in res.evidence_ids]
    verdict = run(
        Q.SUFFICIENCY,
        SufficiencyInput(
            question=res.question,
            answer=res.answer,
            question_type=qtype,
            evidence=statements,
            persona_name=seg.persona.name,
            language=seg.language,
        ),
    )
    ok = verdict.verdict == "sufficient"
    record_sufficiency(res, ok, verdict.score, verdict.verdict, verdict.reason)
    if not ok:
        return _reject(res, "sufficiency", verdict.reason)
    feedback = None
    for rnd in range(1, rounds + 1):
        wrong = run(
            Q.DISTRACTORS,
            DistractorInput(
                count=kind.distractor_count,
                question=res.question,
                answer=res.answer,
                question_type=qtype,
                persona=seg.persona,
                relations=seg.relations,
                arc=seg.arc,
                other_arcs=seg.other_arcs,
                evidence=statements,
                round=rnd,
                feedback=feedback,
                language=seg.language,
            ),
        ).options
        choices, correct = shuffle_choices(qid, rnd, res.answer, wrong, kind.abstains)
        failures = _distinct(choices, res.answer, kind.abstains)
        blind = run(
            Q.DISTRACTOR_CHECK,
            ChoiceInput(
                question=res.question,
                choices=choices,
                mode="blind",
                evidence=None,
                language=seg.language,
            ),
        )
        solved_blind = blind.choice_id == correct and blind.confidence >= CONFIDENT
        res.checks.append(_attempt_row("distractor_blind", rnd, blind, correct, solved_blind))
        if solved_blind:
            failures.append(f"answerable from the question and options alone ({blind.reason})")
        if kind.multi_point:
            single = run(
                Q.DISTRACTOR_CHECK,
                ChoiceInput(
                    question=res.question,
                    choices=choices,
                    mode="single_evidence",
                    evidence=statements[-1],
                    language=seg.language,
                ),
            )
            solved_single = single.choice_id == correct and single.confidence >= CONFIDENT
            res.checks.append(
                _attempt_row("distractor_single_evidence", rnd, single, correct, solved_single)
            )
            if solved_single:
                failures.append(f"answerable from one evidence item ({single.reason})")
        res.rounds.append(
            {
                "round": rnd,
                "choices": [c.model_dump() for c in choices],
                "correct_choice_id": correct,
                "passed": not failures,
            }
        )
        if not failures:
            res.choices, res.correct_choice_id, res.status = choices, correct, "accepted"
            return res
        feedback = "; ".join(failures)
    return _reject(res, "distractors", f"no valid distractors after {rounds} rounds: {feedback}")


def _distinct(choices: list[Choice], answer: str, abstains: bool) -> list[str]:
    texts = [c.text.strip().lower() for c in choices]
    problems = []
    if len(set(texts)) != len(texts):
        problems.append("options repeat each other")
    if not abstains and sum(t == answer.strip().lower() for t in texts) != 1:
        problems.append("a distractor copies the answer")
    return problems


def _attempt_row(name: str, rnd: int, attempt: ChoiceAttempt, correct: str, solved: bool) -> dict:
    return {
        "check_name": name,
        "round": rnd,
        "passed": not solved,
        "score": attempt.confidence,
        "verdict": attempt.choice_id,
        "reason": attempt.reason,
        "detail": json.dumps({"correct": correct, "picked": attempt.choice_id}),
    }


def _reject(res: ItemResult, stage: str, reason: str) -> ItemResult:
    res.status, res.rejected_stage, res.rejected_reason = "rejected", stage, reason
    return res
