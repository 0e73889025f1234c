"""LongMemEval's scoring (Wu et al., ICLR 2025; ``src/evaluation/evaluate_qa.py``,
``print_qa_metrics.py``, ``src/retrieval/eval_utils.py`` and ``run_retrieval.py`` of its
repository).

QA: a yes/no judge (the ``protocol.longmemeval_judge`` stage, its criteria per question type and for
abstention) reads the response against the answer; correct when its reply contains "yes". Reported
per question type (abstention questions count in their type, as LongMemEval's own script counts
them), ``overall``, ``abstention`` / ``non_abstention`` and ``task_average`` (the mean of the
per-type means).

Retrieval, for non-abstention questions only, from the system's ranking of turns (retrieved trace
ids in rank order, de-duplicated; as deep as ``evaluation.ranking_depth``):

- turn level at k in :data:`TURN_K`: ``recall_any`` (some evidence turn in the top k),
  ``recall_all`` (every one), ``ndcg_any`` (binary relevance; DCG = rel₁ + Σᵢ₌₂ relᵢ / log₂ i;
  normalised by the DCG of the ideal order of the whole history: as many relevant items first as
  there are evidence turns);
- session level at k in :data:`SESSION_K`: each ranked turn stands for its session, except that a
  turn of an evidence session that is not itself evidence stands for a different, non-evidence
  session (LongMemEval renames such turns' ids from ``answer_…`` to ``noans_…``); k grows until the
  first k ranked turns cover k distinct sessions or the ranking ends; then the same three scores
  over sessions (evidence sessions: the sessions of evidence turns), the ideal DCG counting one
  relevant item per evidence turn, as LongMemEval's conversion does;
- a question without evidence turns scores recall_any 0, recall_all 1 (every one of none) and
  ndcg_any 0, exactly as LongMemEval's code computes it.

LongMemEval's own runs rank only user turns; a ranking holding assistant turns is scored over the
turns it holds, with the evidence turns (``has_answer``) of either speaker.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar

from clonemem.evaluation.protocols.base import (
    Granularity,
    Group,
    Prediction,
    Protocol,
    ProtocolQuestion,
    QuestionScore,
    Scope,
)
from clonemem.evaluation.protocols.mem0 import UNJUDGED

TURN_K = (5, 10, 50)
SESSION_K = (5, 10)
NO_EVIDENCE_SESSION = (
    "\x00not evidence"  # suffix of a renamed turn's session (LongMemEval's noans_)
)


def dcg(relevances: Sequence[int]) -> float:
    """DCG as LongMemEval computes it: the first item undiscounted, the i-th (i ≥ 2) divided by log₂
    i."""
    return sum(r if i == 0 else r / math.log2(i + 1) for i, r in enumerate(relevances))


def scores_at(
    ranked: Sequence[str], relevant: set[str], ideal_relevant: int, k: int
) -> tuple[float, float, float]:
    """recall_any, recall_all, ndcg_any of the first k ranked ids; ``ideal_relevant`` items of the
    whole history are relevant (the ideal order puts them first)."""
    top = ranked[:k]
    recalled = set(top)
    recall_any = float(any(r in recalled for r in relevant))
    recall_all = float(all(r in recalled for r in relevant))
    ideal = dcg([1] * min(ideal_relevant, k))
    ndcg = dcg([int(t in relevant) for t in top]) / ideal if ideal else 0.0
    return recall_any, recall_all, ndcg


def session_ranking(ranking: Sequence[str], evidence: frozenset[str], scope: Scope) -> list[str]:
    """Each ranked turn's session; a non-evidence turn of an evidence session stands for another
    session."""
    evidence_sessions = {scope.session_of.get(t, t) for t in evidence}
    out = []
    for t in ranking:
        session = scope.session_of.get(t, t)
        out.append(
            session + NO_EVIDENCE_SESSION
            if session in evidence_sessions and t not in evidence
            else session
        )
    return out


def session_k(sessions: Sequence[str], k: int) -> int:
    """k grown until the first k ranked turns cover k distinct sessions (or the ranking ends)."""
    effective = k
    while effective <= len(sessions) and len(set(sessions[:effective])) < k:
        effective += 1
    return effective


def retrieval_scores(
    q: ProtocolQuestion, ranking: Sequence[str], scope: Scope
) -> list[QuestionScore]:
    out = []
    n_evidence = len(q.evidence_turns)
    for k in TURN_K:
        out += _three("turn", k, scores_at(ranking, set(q.evidence_turns), n_evidence, k))
    sessions = session_ranking(ranking, q.evidence_turns, scope)
    relevant = {scope.session_of.get(t, t) for t in q.evidence_turns}
    for k in SESSION_K:
        out += _three(
            "session", k, scores_at(sessions, relevant, n_evidence, session_k(sessions, k))
        )
    return out


def _three(
    granularity: Granularity, k: int, values: tuple[float, float, float]
) -> list[QuestionScore]:
    return [
        QuestionScore(granularity, k, m, v)
        for m, v in zip(("recall_any", "recall_all", "ndcg_any"), values)
    ]


class LongMemEvalProtocol(Protocol):
    name: ClassVar[str] = "longmemeval"
    version: ClassVar[str] = "1"
    metrics: ClassVar[tuple[str, ...]] = ("accuracy", "recall_any", "recall_all", "ndcg_any")
    answer_style: ClassVar[str | None] = "longmemeval"
    judge: ClassVar[str | None] = "longmemeval"
    task_average: ClassVar[bool] = True
    ranks: ClassVar[bool] = True

    def score(self, q: ProtocolQuestion, p: Prediction, scope: Scope) -> list[QuestionScore]:
        label = p.judged.get(self.name)
        if p.answer is None:
            qa = QuestionScore("qa", None, "accuracy", None, "no prediction for this question")
        else:
            qa = QuestionScore(
                "qa",
                None,
                "accuracy",
                None if label is None else float(label),
                UNJUDGED if label is None else None,
            )
        if q.abstention:  # left out of retrieval, as LongMemEval reports it
            return [qa]
        return [qa, *retrieval_scores(q, p.ranking, scope)]

    def groups(self, q: ProtocolQuestion, granularity: Granularity) -> Sequence[Group]:
        if granularity != "qa":
            return [Group(q.source_type), Group("overall")]
        return [
            Group(q.source_type),
            Group("overall"),
            Group("abstention" if q.abstention else "non_abstention"),
        ]

    def type_group(self, q: ProtocolQuestion) -> str | None:
        return q.source_type


def reply_correct(reply: str) -> bool:
    """LongMemEval's reading of the judge: correct when the reply contains "yes" (any case)."""
    return "yes" in reply.lower()
