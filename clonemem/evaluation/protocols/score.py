"""Protocol scores of an evaluation: per question (:func:`score_questions`), then per group with 95%
bootstrap intervals (:func:`aggregate`), as the rows the warehouse keeps and ``evaluate --json`` shows."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from clonemem.evaluation.metrics import bootstrap_ci
from clonemem.evaluation.protocols.base import Granularity, Group, Prediction, Protocol, ProtocolQuestion, Scope
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

    def record(self, eval_run_id: str) -> dict[str, object]:
        """The ``eval_protocol_scores`` row."""
        return {"eval_run_id": eval_run_id, "protocol": self.protocol, "protocol_version": self.version,
                "system": self.system, "k": self.k, "granularity": self.granularity,
                "question_id": self.question_id, "metric": self.metric, "value": self.value, "reason": self.reason}


def score_questions(protocols: Sequence[Protocol], system: str, k: int, questions: Sequence[ProtocolQuestion],
                    predictions: Mapping[str, Prediction], scopes: Mapping[str, Scope],
                    retrieval: bool = True) -> list[ScoreRow]:
    """Every protocol's scores of the questions it applies to; a question without a prediction is
    unscored with that reason. ``retrieval`` False leaves out retrieval scores (they do not depend on the
    evaluation's k: computed once per system)."""
    rows = []
    for proto in protocols:
        for q in questions:
            if not proto.applies(q):
                continue
            for s in proto.score(q, predictions.get(q.question_id, Prediction()), scopes[q.persona_id]):
                if s.granularity != "qa" and not retrieval:
                    continue
                rows.append(ScoreRow(proto.name, proto.version, system, k if s.k is None else s.k, s.granularity,
                                     q.question_id, s.metric, s.value, s.reason,
                                     tuple(proto.groups(q, s.granularity)),
                                     proto.type_group(q) if proto.task_average and s.granularity == "qa" else None))
    return rows


def _values(values: Sequence[float | None]) -> np.ndarray:
    return np.array([np.nan if v is None else v for v in values], dtype=np.float64)


def _record(key: tuple, n: int, value: float | None, ci: tuple[float | None, float | None]) -> dict[str, object]:
    protocol, version, system, k, granularity, group, category, metric = key
    return {"protocol": protocol, "protocol_version": version, "system": system, "k": k,
            "granularity": granularity, "group_name": group, "category": category, "metric": metric, "n": n,
            "value": value, "ci_low": ci[0], "ci_high": ci[1]}


def aggregate(rows: Sequence[ScoreRow], samples: int, seed: int) -> list[dict[str, object]]:
    """Per (protocol, system, k, granularity, group, metric): the mean over the group's scored questions,
    ``n`` the group's questions (unscored ones included, left out of the mean) and the 95% percentile
    bootstrap interval of the mean; plus ``task_average`` (the mean of the per-type means, its interval
    from resampling within each type) for protocols that report one."""
    groups: dict[tuple, list[float | None]] = defaultdict(list)
    by_type: dict[tuple, dict[str, list[float | None]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        for g in r.groups:
            groups[(r.protocol, r.version, r.system, r.k, r.granularity, g.name, g.category, r.metric)].append(r.value)
        if r.type_group is not None:
            by_type[(r.protocol, r.version, r.system, r.k, r.granularity, TASK_AVERAGE, None, r.metric)][
                r.type_group].append(r.value)
    out = []
    for key, values in groups.items():
        x = _values(values)
        scored = x[~np.isnan(x)]
        out.append(_record(key, len(values), float(scored.mean()) if scored.size else None,
                           bootstrap_ci(x, samples, seed)))
    for key, types in by_type.items():
        n = sum(len(v) for v in types.values())
        out.append(_record(key, n, *task_average([_values(v) for _, v in sorted(types.items())], samples, seed)))
    return out


def task_average(types: Sequence[np.ndarray], samples: int, seed: int) -> tuple[float | None,
                                                                               tuple[float | None, float | None]]:
    """The mean of the per-type means (types without a scored question left out) and its 95% interval:
    each resample draws every type's questions anew within the type (a stratified bootstrap)."""
    scored = [v[~np.isnan(v)] for v in types]
    scored = [v for v in scored if v.size]
    if not scored:
        return None, (None, None)
    point = float(np.mean([v.mean() for v in scored]))
    rng = np.random.default_rng(seed)
    means = np.mean([v[rng.integers(0, v.size, size=(samples, v.size))].mean(axis=1) for v in scored], axis=0)
    low, high = np.percentile(means, [2.5, 97.5])
    return point, (float(low), float(high))


def result_rows(records: Sequence[Mapping[str, object]]) -> list[ProtocolRow]:
    """``evaluate --json``'s protocol rows from :func:`aggregate`'s records, in a stable order."""
    order = {"overall": 0, "overall_with_adversarial": 1, TASK_AVERAGE: 2}

    def key(r: Mapping[str, object]) -> tuple:
        category = r["category"]
        return (r["protocol"], r["system"], r["k"], r["granularity"],
                category if isinstance(category, int) else 99, order.get(str(r["group_name"]), 3),
                r["group_name"], r["metric"])

    return ProtocolRow.merged(sorted(records, key=key))
