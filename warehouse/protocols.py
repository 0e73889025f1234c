"""The standard protocols' rows (migration 0024): written with an evaluation, read back as the
``evaluate --json`` rows (:class:`ProtocolRow`) by the CLI, the leaderboard and the dashboard."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from clonemem.schemas.results import ProtocolRow
from clonemem.warehouse.db import Warehouse

QA = "qa"  # the granularity stored for answer scores (retrieval rows: "turn" or "session")


def land_protocols(
    wh: Warehouse,
    scores: Sequence[Mapping[str, Any]],
    answers: Sequence[Mapping[str, Any]],
    groups: Sequence[Mapping[str, Any]],
) -> None:
    """An evaluation's protocol rows, in the caller's transaction if any: per-question scores
    (``eval_protocol_scores``), what each protocol scored (``eval_protocol_answers``) and per-group
    aggregates (``eval_protocol_metrics``)."""
    with wh.transaction():
        wh.insert("eval_protocol_scores", list(scores))
        wh.insert("eval_protocol_answers", list(answers))
        wh.insert("eval_protocol_metrics", list(groups))


def protocol_rows(
    wh: Warehouse,
    eval_run_ids: str | Sequence[str],
    protocol: str | None = None,
    system: str | None = None,
) -> list[ProtocolRow]:
    """The protocol rows of one or more evaluations (optionally one protocol, one system), one per
    (evaluation, protocol, system, k, granularity, group), each naming its evaluation, in a stable
    order: evaluation, protocol, system, k, granularity, the category's number, then the group's
    name."""
    ids = [eval_run_ids] if isinstance(eval_run_ids, str) else list(eval_run_ids)
    if not ids:
        return []
    where = ["eval_run_id IN (SELECT unnest(?))"]
    params: list[Any] = [ids]
    if protocol is not None:
        where.append("protocol = ?")
        params.append(protocol)
    if system is not None:
        where.append("system = ?")
        params.append(system)
    found = wh.rows(
        "SELECT eval_run_id, protocol, protocol_version, system, k, granularity, group_name, "
        "category, metric, n, value, ci_low, ci_high FROM eval_protocol_metrics "
        "WHERE " + " AND ".join(where) + " ORDER BY eval_run_id, protocol, system, k, granularity, "
        "category NULLS LAST, group_name, metric",
        params,
    )
    cols = (
        "eval_run_id",
        "protocol",
        "protocol_version",
        "system",
        "k",
        "granularity",
        "group_name",
        "category",
        "metric",
        "n",
        "value",
        "ci_low",
        "ci_high",
    )
    return ProtocolRow.merged(dict(zip(cols, r)) for r in found)


def question_protocol_scores(
    wh: Warehouse, eval_run_id: str, question_id: str
) -> list[dict[str, Any]]:
    """One question's scores under every protocol of one evaluation (the dashboard's Question
    inspector): protocol, system, k, granularity, metric, value, the reason when unscored, and what
    was scored."""
    cols = (
        "protocol",
        "protocol_version",
        "system",
        "k",
        "granularity",
        "metric",
        "value",
        "reason",
        "answer_text",
        "judge_label",
    )
    return [
        dict(zip(cols, r))
        for r in wh.rows(
            "SELECT s.protocol, s.protocol_version, s.system, s.k, s.granularity, s.metric, "
            " s.value, s.reason, a.answer_text, a.judge_label FROM eval_protocol_scores s "
            "LEFT JOIN eval_protocol_answers a ON a.eval_run_id = s.eval_run_id "
            " AND a.protocol = s.protocol AND a.system = s.system AND a.k = s.k "
            " AND a.question_id = s.question_id AND s.granularity = 'qa' "
            "WHERE s.eval_run_id = ? AND s.question_id = ? "
            "ORDER BY s.protocol, s.system, s.k, s.granularity, s.metric",
            [eval_run_id, question_id],
        )
    ]
