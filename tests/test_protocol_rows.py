"""The standard protocols' warehouse rows (migration 0024): written with an evaluation, read back as
``evaluate --json``'s protocol rows."""

from __future__ import annotations

from clonemem.warehouse import Warehouse
from clonemem.warehouse.protocols import land_protocols, protocol_rows, question_protocol_scores


def _group(eid: str, protocol: str, group: str, metric: str, value: float, **kw: object) -> dict:
    return {
        "eval_run_id": eid,
        "protocol": protocol,
        "protocol_version": "1",
        "system": "bm25",
        "k": 5,
        "granularity": kw.get("granularity", "qa"),
        "group_name": group,
        "category": kw.get("category"),
        "metric": metric,
        "n": 4,
        "value": value,
        "ci_low": value - 0.1,
        "ci_high": value + 0.1,
    }


def test_rows_come_back_one_per_group_with_their_metrics(wh: Warehouse) -> None:
    groups = [
        _group("e1", "mem0", "multi-hop", "f1", 0.5, category=1),
        _group("e1", "mem0", "multi-hop", "bleu1", 0.4, category=1),
        _group("e1", "mem0", "overall", "f1", 0.6),
        _group("e1", "longmemeval", "overall", "recall_any", 0.75, granularity="turn"),
        _group("e2", "mem0", "overall", "f1", 0.9),
    ]
    scores = [
        {
            "eval_run_id": "e1",
            "protocol": "mem0",
            "protocol_version": "1",
            "system": "bm25",
            "k": 5,
            "granularity": "qa",
            "question_id": "q1",
            "metric": "f1",
            "value": 0.5,
            "reason": None,
        }
    ]
    answers = [
        {
            "eval_run_id": "e1",
            "protocol": "mem0",
            "system": "bm25",
            "k": 5,
            "question_id": "q1",
            "answer_text": "Paris",
            "judge_label": "CORRECT",
            "judge_reason": "same city",
            "given": False,
        }
    ]
    land_protocols(wh, scores, answers, groups)
    rows = protocol_rows(wh, "e1")
    dumped = [r.model_dump(mode="json") for r in rows]
    assert dumped == [
        {
            "eval_run_id": "e1",
            "protocol": "longmemeval",
            "protocol_version": "1",
            "system": "bm25",
            "k": 5,
            "group": "overall",
            "n": 4,
            "granularity": "turn",
            "recall_any": 0.75,
            "recall_any_ci": [0.65, 0.85],
        },
        {
            "eval_run_id": "e1",
            "protocol": "mem0",
            "protocol_version": "1",
            "system": "bm25",
            "k": 5,
            "group": "multi-hop",
            "n": 4,
            "category": 1,
            "f1": 0.5,
            "f1_ci": [0.4, 0.6],
            "bleu1": 0.4,
            "bleu1_ci": [0.30000000000000004, 0.5],
        },
        {
            "eval_run_id": "e1",
            "protocol": "mem0",
            "protocol_version": "1",
            "system": "bm25",
            "k": 5,
            "group": "overall",
            "n": 4,
            "f1": 0.6,
            "f1_ci": [0.5, 0.7],
        },
    ]
    assert [r.group for r in protocol_rows(wh, ["e1", "e2"], protocol="mem0")] == [
        "multi-hop",
        "overall",
        "overall",
    ]
    assert question_protocol_scores(wh, "e1", "q1")[0]["answer_text"] == "Paris"
