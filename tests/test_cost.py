"""Cost before spending: the dry run counts exactly the calls an offline run makes, and prices them
at the models the config names, with no key and no network."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from clonemem.cost import dry_run_config, estimate, price
from clonemem.schemas.config import RunConfig
from tests.pipeline_kit import TINY

LIVE_MODELS = {
    "generator": "anthropic/claude-haiku-4-5",
    "qa_writer": "gemini/gemini-2.5-flash",
    "validator": "openai/gpt-4o-mini",
    "extractor": "openai/gpt-4o-mini",
    "answerer": "openai/gpt-4o-mini",
    "judge": "openai/some-unlisted-model",
}


def _tiny(personas: int = 1, **models: str) -> RunConfig:
    data = tomllib.loads(TINY.replace("{personas}", str(personas)))
    if models:
        data["models"] = models
    return RunConfig.model_validate(data)


def test_pricing_scales_the_sample_and_names_unpriced_models() -> None:
    cfg = RunConfig.model_validate(
        {
            **_tiny(personas=4, **LIVE_MODELS).model_dump(mode="json"),
            "pricing": {"openai/gpt-4o-mini": {"input_per_mtok": 1.0, "output_per_mtok": 2.0}},
        }
    )
    counted = [
        ("generation.persona", "generator", 1, 1000, 200),
        ("qa.sufficiency", "validator", 3, 3000, 300),
        ("eval.judge", "judge", 2, 500, 50),
    ]
    got = price(cfg, counted, sampled=2)
    lines = {line.stage: line for line in got.lines}
    assert (lines["generation.persona"].calls, lines["generation.persona"].input_tokens) == (
        2,
        2000,
    )  # ×2
    # haiku at the built-in list price ($1 in / $5 out per Mtok); gpt-4o-mini at the config's own price
    assert lines["generation.persona"].cost_usd == pytest.approx((2000 * 1.0 + 400 * 5.0) / 1e6)
    assert lines["qa.sufficiency"].cost_usd == pytest.approx((6000 * 1.0 + 600 * 2.0) / 1e6)
    assert lines["eval.judge"].cost_usd is None and got.unpriced_models == [
        "openai/some-unlisted-model"
    ]
    assert got.total_usd == pytest.approx(round((2000 + 2000 + 6000 + 1200) / 1e6, 4))
    assert "No price known for: openai/some-unlisted-model" in got.table()


def test_dry_run_is_offline_and_sampled() -> None:
    cfg = _tiny(personas=5, **LIVE_MODELS)
    dry = dry_run_config(cfg, sample_personas=2)
    assert {str(dry.models.ref(r)).split("/")[0] for r in LIVE_MODELS} == {"offline"}
    assert dry.generation.personas == 2 and cfg.generation.personas == 5


@pytest.mark.prefect
def test_estimate_counts_what_an_offline_run_calls(tmp_path: Path, monkeypatch) -> None:
    from clonemem.flows.pipeline import pipeline_flow
    from clonemem.warehouse import Warehouse

    for var in ("ANTHROPIC_API_KEY", "GEMINI_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(var, raising=False)  # no key: nothing could reach a live API
    live = _tiny(**LIVE_MODELS)
    got = estimate(live)
    from prefect.settings import PREFECT_TASKS_REFRESH_CACHE, temporary_settings

    offline = _tiny()
    path = tmp_path / "wh.duckdb"
    with temporary_settings(
        updates={PREFECT_TASKS_REFRESH_CACHE: True}
    ):  # the estimate just filled the cache
        pipeline_flow(str(path), offline, gate=False, evaluate=False)
    with Warehouse.open_reader(path) as wh:
        real = {
            (s, r): (n, i, o)
            for s, r, n, i, o in wh.rows(
                "SELECT stage, role, count(*), sum(input_tokens), sum(output_tokens) FROM llm_calls GROUP BY ALL"
            )
        }
    assert {
        (x.stage, x.role): (x.calls, x.input_tokens, x.output_tokens) for x in got.lines
    } == real
    assert {x.model for x in got.lines if x.role == "generator"} == {"anthropic/claude-haiku-4-5"}
    assert got.total_usd > 0 and got.unpriced_models == []  # the judge plays no part in generation
