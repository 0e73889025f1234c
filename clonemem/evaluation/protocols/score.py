"""Protocol scores of an evaluation: per question (:func:`score_questions`), then per group with 95%
bootstrap intervals (:func:`aggregate`), as the rows the warehouse keeps and ``evaluate --json``
shows."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from clonemem.evaluation.metrics import bootstrap_ci, top_k_unique
from clonemem.evaluation.protocols.answer import ProtocolOutcome
from clonemem.evaluation.protocols.base import (
    Granularity,
    Group,
    Prediction,
    Protocol,
    ProtocolQuestion,
    Scope,
)
from clonemem.evaluation.protocols.load import ProtocolData
from clonemem.evaluation.run import Outcome, PersonaData, Retrieval
from clonemem.schemas.results import ProtocolRow

TASK_AVERAGE = "task_average"


@dataclass(frozen=True)
class ScoreRow:
    """One question's score under one protocol for one (system, k) and the groups it counts in."""

    protocol: str
    version: str
    system: str
    k: int  # the evaluation's k (answer scores) or the retrieval cut-off
    granularity: Granularity
    question_id: str
    metric: str
    value: float | None
    reason: str | None
    groups: tuple[Group, ...]
    type_group: str | None  # the question-type group the task average is taken over

    def record(self, eval_run_id: str | None) -> dict[str, object]:
        """The ``eval_protocol_scores`` row (the evaluation's id added when it lands, if None)."""
        return {
            **({} if eval_run_id is None else {"eval_run_id": eval_run_id}),
            "protocol": self.protocol,
            "protocol_version": self.version,
            "system": self.system,
            "k": self.k,
            "granularity": self.granularity,
            "question_id": self.question_id,
            "metric": self.metric,
            "value": self.value,
            "reason": self.reason,
        }


def score_questions(
    protocols: Sequence[Protocol],
    system: str,
    k: int,
    questions: Sequence[ProtocolQuestion],
    predictions: Mapping[str, Prediction],
    scopes: Mapping[str, Scope],
    retrieval: bool = True,
) -> list[ScoreRow]:
    """Every protocol's scores of the questions it applies to; a question without a prediction is
    unscored with that reason. ``retrieval`` False leaves out retrieval scores (they do not depend
    on the evaluation's k: computed once per system)."""
    rows = []
    for proto in protocols:
        for q in questions:
            if not proto.applies(q):
                continue
            for s in proto.score(
                q, predictions.get(q.question_id, Prediction()), scopes[q.persona_id]
            ):
                if s.granularity != "qa" and not retrieval:
                    continue
                rows.append(
                    ScoreRow(
                        proto.name,
                        proto.version,
                        system,
                        k if s.k is None else s.k,
                        s.granularity,
                        q.question_id,
                        s.metric,
                        s.value,
                        s.reason,
                        tuple(proto.groups(q, s.granularity)),
                        proto.type_group(q)
                        if proto.task_average and s.granularity == "qa"
                        else None,
                    )
                )
    return rows


def _values(values: Sequence[float | None]) -> np.ndarray:
    return np.array([np.nan if v is None else v for v in values], dtype=np.float64)


def _record(
    key: tuple, n: int, value: float | None, ci: tuple[float | None, float | None]
) -> dict[str, object]:
    protocol, version, system, k, granularity, group, category, metric = key
    return {
        "protocol": protocol,
        "protocol_version": version,
        "system": system,
        "k": k,
        "granularity": granularity,
        "group_name": group,
        "category": category,
        "metric": metric,
        "n": n,
        "value": value,
        "ci_low": ci[0],
        "ci_high": ci[1],
    }


def aggregate(rows: Sequence[ScoreRow], samples: int, seed: int) -> list[dict[str, object]]:
    """Per (protocol, system, k, granularity, group, metric): the mean over the group's scored
    questions, ``n`` the group's questions (unscored ones included, left out of the mean) and the
    95% percentile bootstrap interval of the mean; plus ``task_average`` (the mean of the per-type
    means, its interval from resampling within each type) for protocols that report one."""
    groups: dict[tuple, list[float | None]] = defaultdict(list)
    by_type: dict[tuple, dict[str, list[float | None]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        for g in r.groups:
            groups[
                (r.protocol, r.version, r.system, r.k, r.granularity, g.name, g.category, r.metric)
            ].append(r.value)
        if r.type_group is not None:
            by_type[
                (r.protocol, r.version, r.system, r.k, r.granularity, TASK_AVERAGE, None, r.metric)
            ][r.type_group].append(r.value)
    out = []
    for key, values in groups.items():
        x = _values(values)
        scored = x[~np.isnan(x)]
        out.append(
            _record(
                key,
                len(values),
                float(scored.mean()) if scored.size else None,
                bootstrap_ci(x, samples, seed),
            )
        )
    for key, types in by_type.items():
        n = sum(len(v) for v in types.values())
        out.append(
            _record(
                key, n, *task_average([_values(v) for _, v in sorted(types.items())], samples, seed)
            )
        )
    return out


def task_average(
    types: Sequence[np.ndarray], samples: int, seed: int
) -> tuple[float | None, tuple[float | None, float | None]]:
    """The mean of the per-type means (types without a scored question left out) and its 95%
    interval: each resample draws every type's questions anew within the type (a stratified
    bootstrap)."""
    scored = [v[~np.isnan(v)] for v in types]
    scored = [v for v in scored if v.size]
    if not scored:
        return None, (None, None)
    point = float(np.mean([v.mean() for v in scored]))
    rng = np.random.default_rng(seed)
    means = np.mean(
        [v[rng.integers(0, v.size, size=(samples, v.size))].mean(axis=1) for v in scored], axis=0
    )
    low, high = np.percentile(means, [2.5, 97.5])
    return point, (float(low), float(high))


def result_rows(records: Sequence[Mapping[str, object]]) -> list[ProtocolRow]:
    """``evaluate --json``'s protocol rows from :func:`aggregate`'s records, in a stable order: by
    protocol and system, answer scores before retrieval scores, then k, category, overall groups,
    name."""
    order = {"overall": 0, "overall_with_adversarial": 1, TASK_AVERAGE: 2}

    def key(r: Mapping[str, object]) -> tuple:
        category = r["category"]
        return (
            r["protocol"],
            r["system"],
            r["granularity"] != "qa",
            r["granularity"],
            r["k"],
            category if isinstance(category, int) else 99,
            order.get(str(r["group_name"]), 3),
            r["group_name"],
            r["metric"],
        )

    return ProtocolRow.merged(sorted(records, key=key))


def evaluation_scores(
    protocols: Sequence[Protocol],
    system: str,
    k: int,
    questions: Sequence[ProtocolQuestion],
    outcomes: Mapping[str, ProtocolOutcome],
    choices: Mapping[str, str | None],
    rankings: Mapping[str, tuple[str, ...]],
    scopes: Mapping[str, Scope],
    retrieval: bool,
) -> list[ScoreRow]:
    """The protocols' scores of one (system, k) over some questions: each protocol's prediction from
    the question's protocol outcome (its answer style's answer, or a file's), the CloneMem
    answerer's multiple-choice pick and the retrieval's ranking of turns."""
    rows = []
    for proto in protocols:
        predictions = {
            q.question_id: outcomes.get(q.question_id, ProtocolOutcome(q.question_id)).prediction(
                proto, choices.get(q.question_id), rankings.get(q.question_id, ())
            )
            for q in questions
        }
        rows += score_questions([proto], system, k, questions, predictions, scopes, retrieval)
    return rows


@dataclass(frozen=True)
class ProtocolLanding:
    """An evaluation's protocol rows as they land (the evaluation's id is added when landing)."""

    scores: list[dict[str, object]]
    answers: list[dict[str, object]]
    groups: list[dict[str, object]]

    def with_run(self, eval_run_id: str) -> ProtocolLanding:
        return ProtocolLanding(
            *(
                [{"eval_run_id": eval_run_id, **r} for r in rows]
                for rows in (self.scores, self.answers, self.groups)
            )
        )

    def result(self) -> list[ProtocolRow]:
        return result_rows(self.groups)


def protocol_landing(
    data: ProtocolData,
    systems: Sequence[str],
    ks: Sequence[int],
    personas: Sequence[PersonaData],
    retrievals: Mapping[tuple[str, str], Retrieval],
    answers: Mapping[tuple[str, int, str], Sequence[Outcome]],
    protocol_answers: Mapping[tuple[str, int, str], Sequence[ProtocolOutcome]],
    samples: int,
    seed: int,
    depth: int,
    rank: bool = True,
) -> ProtocolLanding:
    """Every protocol's per-question scores, what it scored, and its groups with bootstrap
    intervals, over the evaluation's systems and k values (retrieval scores once per system: they do
    not depend on k; none when ``rank`` is False: a predictions file without rankings)."""
    protocols = data.protocols
    rows: list[ScoreRow] = []
    scored: list[dict[str, object]] = []
    for system in systems:
        for i, k in enumerate(ks):
            for p in personas:
                questions = [
                    data.questions[q.question_id]
                    for q in p.questions
                    if q.question_id in data.questions
                ]
                retrieval = retrievals[(system, p.persona_id)]
                choices = {
                    o.question_id: o.predicted_choice_id for o in answers[(system, k, p.persona_id)]
                }
                outcomes = {
                    o.question_id: o for o in protocol_answers.get((system, k, p.persona_id), ())
                }
                rankings = {
                    q.question_id: tuple(
                        top_k_unique(
                            [
                                t
                                for item in retrieval.results[q.question_id].trace_ids
                                for t in item
                            ],
                            depth,
                        )
                    )
                    for q in questions
                }
                rows += evaluation_scores(
                    protocols,
                    system,
                    k,
                    questions,
                    outcomes,
                    choices,
                    rankings,
                    data.scopes,
                    retrieval=rank and i == 0,
                )
                scored += _answer_rows(protocols, system, k, questions, outcomes, choices)
    return ProtocolLanding([r.record(None) for r in rows], scored, aggregate(rows, samples, seed))


def _answer_rows(
    protocols: Sequence[Protocol],
    system: str,
    k: int,
    questions: Sequence[ProtocolQuestion],
    outcomes: Mapping[str, ProtocolOutcome],
    choices: Mapping[str, str | None],
) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for proto in protocols:
        for q in questions:
            if not proto.applies(q):
                continue
            o = outcomes.get(q.question_id, ProtocolOutcome(q.question_id))
            pick = o.prediction(proto, choices.get(q.question_id), ())
            text = pick.answer if pick.answer is not None else pick.choice_id
            label = o.labels.get(proto.name) if proto.judge else None
            out.append(
                {
                    "protocol": proto.name,
                    "system": system,
                    "k": k,
                    "question_id": q.question_id,
                    "answer_text": text,
                    "judge_label": None if label is None else ("correct" if label else "wrong"),
                    "judge_reason": o.notes.get(proto.name) if proto.judge else None,
                    "given": o.given is not None,
                }
            )
    return out
