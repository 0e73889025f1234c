"""The dashboard's Gym page: what it shows of a landed gym run is what SQL over the same warehouse says."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from clonemem.warehouse import Warehouse
from tests.dashboard_kit import app, charts, frame, sql, texts

SMALL = {
    "name": "gymdash",
    "generation": {"personas": 1, "major_events": 2},
    "gym": {
        "periods": 3,
        "states_per_question": 2,
        "turns_per_exposure": 1,
        "questions": 3,
        "variables": 4,
    },
}


@pytest.fixture(scope="module")
def gym_wh(tmp_path_factory) -> Path:
    from clonemem.flows.gym import gym_flow
    from clonemem.schemas.config import RunConfig

    path = tmp_path_factory.mktemp("gymdash") / "wh.duckdb"
    gym_flow(str(path), ["bm25", "no_memory"], RunConfig.model_validate(SMALL))
    return path


def test_the_gym_page_says_how_to_start_on_a_warehouse_without_runs(
    tmp_path: Path, monkeypatch
) -> None:
    path = tmp_path / "empty.duckdb"
    Warehouse.open_writer(path).close()
    monkeypatch.setenv("CLONEMEM_WAREHOUSE", str(path))
    at = app("Gym")
    assert "No gym runs yet: `clonemem gym --config configs/gym-base.toml" in texts(at)


def test_the_gym_page_shows_scores_over_positions_and_the_conversations(
    gym_wh: Path, monkeypatch
) -> None:
    monkeypatch.setenv("CLONEMEM_WAREHOUSE", str(gym_wh))
    at = app("Gym")
    overall = frame(
        at, "system", "accuracy", "memory_score", "off_policy_memory_score", "on_policy_rank"
    )
    stored = sql(
        gym_wh,
        "SELECT system, value FROM gym_metrics WHERE position IS NULL AND policy = 'on' "
        "AND metric = 'accuracy' AND system <> '(bounds)' ORDER BY system",
    )
    assert sorted(zip(overall["system"], overall["accuracy"], strict=True)) == list(
        stored.iter_rows()
    )
    shown = charts(at)
    accuracy = next(
        iter(shown[0].values())
    )  # the accuracy chart's data: systems and both bounds, 4 positions
    assert set(accuracy["system"]) == {"bm25", "no_memory", "random bound", "upper bound"}
    assert (
        accuracy.filter(pl.col("system") == "bm25").sort("position")["value"].to_list()
        == sql(
            gym_wh,
            "SELECT value FROM gym_metrics WHERE system = 'bm25' AND policy = 'on' AND metric = 'accuracy' "
            "AND position IS NOT NULL ORDER BY position",
        )["value"].to_list()
    )
    # the viewer's first choice: bm25, the one persona, period 0 (every variable's opening)
    turns = sql(gym_wh, "SELECT text FROM gym_turns WHERE system = 'bm25' AND period = 0")
    assert len(at.chat_message) == turns.height > 0
    said = " ".join(m.markdown[0].value for m in at.chat_message)
    assert all(t in said for t in turns["text"].to_list())
    answers = frame(at, "policy", "question", "choice_id", "correct_id", "diagnosis")
    assert answers.height == 2 * 3  # on- and off-policy, three questions after period 0
