"""Cost before spending: the estimate prints without any network call, and a run with --max-cost stops
cleanly before a call would take its spend over the budget, with what it finished landed; the next run
resumes from the cache and ends equal to a run that was never stopped, with the spend counted once.

The offline provider is priced in the config (``[pricing."offline/world"]``), which rehearses a budget
exactly as a live run would spend it, without a network."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.pipeline_kit import clonemem, content, tiny_config

pytestmark = [pytest.mark.slow, pytest.mark.faults, pytest.mark.prefect, pytest.mark.timeout(1200)]

PRICES = """
[pricing."offline/world"]
input_per_mtok = 100.0
output_per_mtok = 400.0
[pricing."offline/writer"]
input_per_mtok = 100.0
output_per_mtok = 400.0
[pricing."offline/validator"]
input_per_mtok = 100.0
output_per_mtok = 400.0
"""


def priced_config(folder: Path) -> Path:
    path = tiny_config(folder)
    text = path.read_text("utf-8")
    # top-level keys must come before the first table
    path.write_text(text.replace("[generation]", PRICES + "\n[generation]", 1), "utf-8")
    return path


def spend(wh: Path) -> list[tuple]:
    from clonemem.warehouse import Warehouse

    with Warehouse.open_reader(wh) as r:
        return r.rows(
            "SELECT stage, count(*), sum(input_tokens), sum(output_tokens), round(sum(cost_usd), 6) "
            "FROM llm_calls GROUP BY stage ORDER BY stage"
        )


def test_estimate_prints_a_priced_table_without_network(tmp_path: Path) -> None:
    cfg = tmp_path / "live.toml"
    cfg.write_text(
        'name = "est"\n[models]\ngenerator = "anthropic/claude-haiku-4-5"\n'
        'qa_writer = "gemini/gemini-2.5-flash"\nvalidator = "openai/gpt-4o-mini"\n'
        "[generation]\npersonas = 1\nmajor_events = 2\nphases_per_event = 2\nevents_per_phase = 2\n"
        "traces_per_event = 2\n",
        "utf-8",
    )
    got = clonemem(
        tmp_path / "wh.duckdb",
        tmp_path / "home",
        "run",
        "--config",
        str(cfg),
        "--estimate",
        ANTHROPIC_API_KEY="",
        GEMINI_API_KEY="",
        OPENAI_API_KEY="",  # no key: nothing could be called
        ANTHROPIC_BASE_URL="http://192.0.2.1:9",
        OPENAI_BASE_URL="http://192.0.2.1:9",
    )
    assert got.returncode == 0, got.stderr
    assert "generation.trace_content" in got.stdout and "anthropic/claude-haiku-4-5" in got.stdout
    assert "qa.sufficiency" in got.stdout and "openai/gpt-4o-mini" in got.stdout
    total = next(line for line in got.stdout.splitlines() if line.startswith("total"))
    assert float(total.split()[-1]) > 0
    assert not (tmp_path / "wh.duckdb").exists()  # the dry run used a throw-away warehouse


def test_max_cost_stops_cleanly_and_the_next_run_resumes(tmp_path: Path) -> None:
    clean_dir, cut_dir = tmp_path / "clean", tmp_path / "cut"
    clean_dir.mkdir()
    cut_dir.mkdir()
    clean_wh, cut_wh = clean_dir / "wh.duckdb", cut_dir / "wh.duckdb"
    got = clonemem(
        clean_wh, clean_dir / "home", "generate", "--config", str(priced_config(clean_dir))
    )
    assert got.returncode == 0, got.stderr
    full = sum(row[4] for row in spend(clean_wh))
    assert full > 0.5  # the priced offline run costs real (rehearsal) money

    budget = round(full / 3, 4)
    cfg, home = priced_config(cut_dir), cut_dir / "home"
    got = clonemem(cut_wh, home, "generate", "--config", str(cfg), "--max-cost", str(budget))
    assert got.returncode == 6, got.stderr  # the documented exit code of a stop at the budget
    errors = [line for line in got.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "cost budget" in errors[0] and "Traceback" not in got.stderr
    partial = spend(cut_wh) if cut_wh.exists() else []
    assert sum(row[4] for row in partial) <= budget  # never over the budget

    got = clonemem(cut_wh, home, "generate", "--config", str(cfg))
    assert got.returncode == 0, got.stderr
    assert content(cut_wh) == content(clean_wh)
    # every call on record: the stopped run's finished work came from the cache, and a step in flight at
    # the stop paid for calls that the resumed run makes again, so those are on record twice
    again, clean = spend(cut_wh), spend(clean_wh)
    assert [row[0] for row in again] == [row[0] for row in clean]
    assert all(a[1] >= c[1] for a, c in zip(again, clean, strict=True))
    # what is paid again is at most what the stopped run spent (its in-flight work), so within the budget
    assert sum(a[4] for a in again) - sum(c[4] for c in clean) <= budget + 1e-6
