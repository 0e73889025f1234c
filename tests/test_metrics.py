"""The CloneMem metrics against hand-computed cases."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from clonemem.evaluation import metrics as M


def test_dedup_before_the_cut() -> None:
    # duplicates are removed in rank order before cutting at K
    assert M.top_k_unique(["a", "a", "b", "a", "c", "d"], 3) == ["a", "b", "c"]
    r = M.recall_at_k([["c"]], ["a", "a", "a", "b", "c"], 3)
    assert r["recall_flat"] == 1.0  # c is the 3rd unique id


def test_partly_retrieved_evidence() -> None:
    sets = [["t1", "t2"], ["t3"]]
    r = M.recall_at_k(sets, ["t1", "x", "t9"], 3)
    assert r == {
        "recall_flat": pytest.approx(1 / 3),
        "recall_all_all": 0.0,
        "recall_all_any": 0.0,
        "recall_any_all": 0.0,
        "recall_any_any": 1.0,
    }
    r = M.recall_at_k(sets, ["t3", "t1"], 5)
    assert r == {
        "recall_flat": pytest.approx(2 / 3),
        "recall_all_all": 0.0,
        "recall_all_any": 1.0,
        "recall_any_all": 1.0,
        "recall_any_any": 1.0,
    }
    r = M.recall_at_k(sets, ["t2", "t3", "t1"], 3)
    assert all(v == 1.0 for v in r.values())


def test_gold_pooled_over_evidence_sets() -> None:
    # the same trace in two evidence sets counts once in the pooled gold
    r = M.recall_at_k([["t1", "t2"], ["t2", "t3"]], ["t2"], 5)
    assert r["recall_flat"] == pytest.approx(1 / 3)
    assert r["recall_any_all"] == 0.0 and r["recall_all_any"] == 1.0


def test_evidence_without_ids_is_skipped_and_no_evidence_scores_zero() -> None:
    assert M.recall_at_k([[], ["t1"]], ["t1"], 5)["recall_all_all"] == 1.0
    assert M.recall_at_k([], ["t1"], 5) == dict.fromkeys(M.RECALLS, 0.0)
    assert M.recall_at_k([[], []], ["t1"], 5) == dict.fromkeys(M.RECALLS, 0.0)


def test_cut_at_k() -> None:
    r = M.recall_at_k([["t5"]], ["t1", "t2", "t3", "t4", "t5"], 4)
    assert r["recall_any_any"] == 0.0
    assert M.recall_at_k([["t5"]], ["t1", "t2", "t3", "t4", "t5"], 5)["recall_any_any"] == 1.0


def test_choice_accuracy_is_case_insensitive_and_null_for_free_text() -> None:
    assert M.choice_correct("d", "D") == 1.0
    assert M.choice_correct("E", "D") == 0.0
    assert M.choice_correct(None, "D") == 0.0
    assert M.choice_correct("A", None) is None


def test_judge_normalisation_and_unscored() -> None:
    assert M.judged(3, 2, 4, 2) == {
        "qa_consistency": 1.0,
        "qa_hallucination_rate": 0.0,
        "qa_perfect_rate": 1.0,
        "mem_recall": 0.5,
        "mem_helpful": 1.0,
    }
    assert M.judged(0, 0, 2, 1)["qa_hallucination_rate"] == 1.0
    assert M.judged(None, None, 2, None) == dict.fromkeys(M.JUDGED)  # unscored stays None, never 0


def test_aggregate_means_ignore_unscored_and_give_cis() -> None:
    frame = pl.DataFrame(
        {
            "system": ["s"] * 4,
            "k": [5] * 4,
            "question_id": list("abcd"),
            "question_type": ["x", "x", "y", "y"],
            "recall_flat": [1.0, 0.0, 1.0, 0.0],
            "choice_accuracy": [1.0, None, 0.0, 1.0],
        }
    )
    agg = M.aggregate(frame, [], samples=200, seed=1)
    row = {r["metric"]: r for r in agg.iter_rows(named=True)}
    assert row["recall_flat"]["value"] == 0.5 and row["recall_flat"]["n"] == 4
    assert (
        row["choice_accuracy"]["value"] == pytest.approx(2 / 3) and row["choice_accuracy"]["n"] == 3
    )
    assert 0.0 <= row["recall_flat"]["ci_low"] <= 0.5 <= row["recall_flat"]["ci_high"] <= 1.0
    by_type = M.aggregate(frame, ["question_type"], samples=50)
    assert set(by_type["question_type"].to_list()) == {"x", "y"}


def test_bootstrap_ci_is_deterministic() -> None:
    values = np.array([0.0, 1.0] * 20)
    assert M.bootstrap_ci(values, 500, 3) == M.bootstrap_ci(values, 500, 3)
    assert M.bootstrap_ci(np.array([np.nan]), 10, 0) == (None, None)
