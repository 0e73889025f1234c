"""The dashboard's figures as a reader meets them (AppTest), on a generated benchmark re-run from its cache,
gated and evaluated, and on imports (LoCoMo evaluated too): cached steps and zero calls on the Runs page,
pipeline runs told from stage runs, gate measurements with their bounds, options and answers in full,
the per-question diagnosis, LoCoMo turn ids, offline labels, LoCoMo's own categories, a ranked
leaderboard with the diagnosis apart, thousands separators, Prefect UI links and a failure filter."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from benchmarks.dashboard_pages import synthetic_persona
from clonemem.dashboard import links
from clonemem.importers import import_files
from clonemem.warehouse import Warehouse
from tests.dashboard_kit import (
    app,
    assert_clean,
    benchmark_id,
    charts,
    frame,
    imported_warehouse,
    metrics,
    sql,
)
from tests.shared_kit import copy_warehouse

WIDE_TRACES = 1_234


@pytest.fixture(scope="module")
def full(tmp_path_factory, full_once: Path) -> Path:
    """``dashboard_kit.full_warehouse``, then `clonemem run` of 'tiny' again with only its gate bounds
    changed (a new config: generation and stage IV run again with every step from the cache and record
    their runs with no LLM call; the pipeline evaluates again and records its own run), and 'locomo'
    evaluated."""
    from clonemem.flows.evaluation import evaluate_flow
    from clonemem.flows.pipeline import pipeline_flow
    from clonemem.schemas.config import RunConfig, load_config
    from tests.pipeline_kit import tiny_config

    folder = tmp_path_factory.mktemp("dash-figures")
    path = copy_warehouse(full_once, folder / "wh.duckdb")
    cfg = load_config(tiny_config(folder))
    again = cfg.model_copy(
        update={"gate": cfg.gate.model_copy(update={"max_rejection_rate": 0.99})}
    )
    pipeline_flow(str(path), again, gate=True, evaluate=True, systems=["bm25", "random"], ks=[1, 3])
    evaluate_flow(str(path), "locomo", ["bm25", "random"], [1, 3], force=True, config=RunConfig())
    return path


@pytest.fixture(scope="module")
def wide(tmp_path_factory) -> Path:
    """The imports of ``imported_warehouse`` and a release persona with 1,234 traces (counts past 999)."""
    folder = tmp_path_factory.mktemp("dash-wide")
    path = imported_warehouse(folder / "wh.duckdb")
    file = folder / "wide_benchmark_en.json"
    file.write_text(json.dumps(synthetic_persona(0, WIDE_TRACES, 12)), "utf-8")
    with Warehouse.open_writer(path) as wh:
        import_files(wh, "release", [file], "wide")
    return path


@pytest.fixture
def reading(monkeypatch):
    def use(path: Path) -> Path:
        monkeypatch.setenv("CLONEMEM_WAREHOUSE", str(path))
        monkeypatch.delenv("PREFECT_UI_URL", raising=False)
        monkeypatch.delenv("PREFECT_API_URL", raising=False)
        return path

    return use


def _latest_eval(path: Path, name: str) -> str:
    return sql(
        path,
        "SELECT eval_run_id FROM eval_runs WHERE benchmark_id = ? ORDER BY started_at DESC LIMIT 1",
        [benchmark_id(path, name)],
    )["eval_run_id"][0]


# -- Runs ------------------------------------------------------------------------------------------------


@pytest.mark.prefect
def test_runs_page_cached_steps_zero_calls_and_pipeline_runs_apart(reading, full: Path) -> None:
    reading(full)
    at = app("Runs")
    kinds = dict(sql(full, "SELECT kind, count(*) AS n FROM runs GROUP BY ALL").iter_rows())
    assert kinds.get("pipeline", 0) >= 1 and kinds.get("generate", 0) >= 2
    shown = metrics(at)
    assert shown["pipeline runs"] == f"{kinds['pipeline']:,}"
    assert shown["stage runs"] == f"{sum(kinds.values()) - kinds['pipeline']:,}"
    table = frame(at, "kind", "run_id", "llm_calls")
    want = sql(
        full,
        """SELECT run_id, json_extract(summary_json, '$.cached_steps')::BIGINT AS cached_steps,
                               json_extract(summary_json, '$.cached_items')::BIGINT AS cached_items,
                               (SELECT count(*) FROM llm_calls c WHERE c.run_id = r.run_id) AS llm_calls
                        FROM runs r ORDER BY run_id""",
    )
    got = table.select("run_id", "summary.cached_steps", "summary.cached_items", "llm_calls").sort(
        "run_id"
    )
    assert (
        got.rename(
            {"summary.cached_steps": "cached_steps", "summary.cached_items": "cached_items"}
        ).to_dicts()
        == want.to_dicts()
    )
    # the re-run took every generation step from the cache and made no call: 0, not an empty cell
    rerun = want.filter(pl.col("cached_steps") > 0)
    assert rerun.height and 0 in rerun["llm_calls"].to_list()
    assert table["llm_calls"].null_count() == 0


@pytest.mark.prefect
def test_flow_run_ids_link_to_the_prefect_ui(reading, full: Path, monkeypatch) -> None:
    reading(full)
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:4200/api")
    at = app("Runs")
    ids = sql(full, "SELECT run_id, flow_run_id FROM runs WHERE flow_run_id IS NOT NULL")
    assert ids.height
    shown = dict(
        frame(at, "kind", "run_id", "flow_run_id").select("run_id", "flow_run_id").iter_rows()
    )
    assert {r: shown[r] for r in ids["run_id"]} == {
        r: f"http://127.0.0.1:4200/runs/flow-run/{f}" for r, f in ids.iter_rows()
    }
    assert "flow-run ids link to the Prefect UI at http://127.0.0.1:4200" in " ".join(
        c.value for c in at.caption
    )
    monkeypatch.setenv("PREFECT_UI_URL", "https://prefect.example/ui/")
    at = app("Runs")
    assert next(iter(frame(at, "kind", "flow_run_id")["flow_run_id"].drop_nulls())).startswith(
        "https://prefect.example/ui/runs/flow-run/"
    )


def test_prefect_ui_base_url() -> None:
    assert links.prefect_ui({}) is None
    assert links.prefect_ui({"PREFECT_API_URL": "http://h:4200/api/"}) == "http://h:4200"
    assert (
        links.prefect_ui({"PREFECT_API_URL": "http://h/api", "PREFECT_UI_URL": "http://ui/"})
        == "http://ui"
    )
    assert links.flow_run_url("abc", "http://h") == "http://h/runs/flow-run/abc"


def test_counts_have_thousands_separators(reading, wide: Path) -> None:
    reading(wide)
    at = app("Benchmarks", benchmark="wide")
    assert metrics(at)["traces"] == "1,234"
    at = app("Generation", benchmark="wide")
    assert metrics(at)["traces"] == "1,234"


# -- QA quality: the gate --------------------------------------------------------------------------------


@pytest.mark.prefect
def test_gate_table_shows_measured_rates_and_their_bounds(reading, full: Path) -> None:
    reading(full)
    bid = benchmark_id(full, "tiny")
    strict = sql(
        full,
        "SELECT gate_run_id FROM gate_runs WHERE benchmark_id = ? AND status = 'failed'",
        [bid],
    )["gate_run_id"].to_list()
    assert len(strict) == 1
    at = app("QA quality", benchmark="tiny")
    at.selectbox(key="qa_gate_run").set_value(strict[0]).run()  # the strict run: bounds of zero
    assert_clean(at, "QA quality")
    table = frame(at, "suite", "expectation", "measured", "bound")
    got = {r["expectation"]: (r["measured"], r["bound"]) for r in table.iter_rows(named=True)}
    rate = sql(
        full,
        """SELECT (SELECT count(*) FROM qa_rejected JOIN personas USING (persona_id) WHERE benchmark_id = $1)
                               / ((SELECT count(*) FROM qa_rejected JOIN personas USING (persona_id) WHERE benchmark_id = $1)
                                  + (SELECT count(*) FROM questions WHERE benchmark_id = $1)) AS r""",
        [bid],
    )["r"][0]
    assert got["rejection rate within bounds"][0] == pytest.approx(rate)
    assert got["rejection rate within bounds"][1] == "[0.0, 0.0]"
    from clonemem.qa.land import cue_stats

    with Warehouse.open_reader(full) as wh:
        cues = cue_stats(wh, bid)
    assert got["longest option is right at chance level"] == (
        pytest.approx(cues.longest_option_accuracy),
        "[0.25, 0.25]",
    )
    assert got["word overlap with the question is right at chance level"][0] == pytest.approx(
        cues.overlap_option_accuracy
    )
    media, bound = got["media mix matches the configuration"]
    assert media is not None and media > 0 and bound == "[0.0, 0.0]"
    # expectations that count rows have no measurement
    assert got["every evidence trace id exists"] == (None, None)


# -- Question inspector ------------------------------------------------------------------------------------


@pytest.mark.prefect
def test_inspector_options_answers_in_full_and_the_diagnosis(reading, full: Path) -> None:
    reading(full)
    latest = _latest_eval(full, "tiny")
    qid = sql(
        full,
        """SELECT question_id FROM eval_question_scores s JOIN questions q USING (question_id)
                       WHERE eval_run_id = ? AND k = 3 AND q.correct_choice_id IS NOT NULL
                       ORDER BY read_failure DESC, question_id LIMIT 1""",
        [latest],
    )["question_id"][0]
    at = app("Question inspector", benchmark="tiny", question=qid)
    at.selectbox(key=f"qi_k_{latest}").set_value(3).run()
    assert_clean(at, "Question inspector")
    options = sql(
        full,
        "SELECT choice_id, text FROM question_choices WHERE question_id = ? ORDER BY seq",
        [qid],
    )
    shown = at.table[0].value
    assert list(shown["choice_id"]) == options["choice_id"].to_list()
    assert (
        list(shown["text"]) == options["text"].to_list()
    )  # whole texts, in a table that wraps them
    answers = sql(
        full,
        "SELECT system, answer_text FROM eval_answers WHERE eval_run_id = ? AND k = 3 "
        "AND question_id = ? ORDER BY system",
        [latest, qid],
    )
    box = next(e for e in at.expander if e.label.startswith("Answers in full"))
    assert [t.value for t in box.text] == answers["answer_text"].to_list()
    overview = frame(at, "system", "gold_found")
    diagnosis = next(c for c in overview.columns if c.startswith("diagnosis"))
    want = sql(
        full,
        """SELECT system, CASE WHEN write_failure = 1 THEN 'write' WHEN read_failure = 1 THEN 'read'
                                         WHEN utilization_failure = 1 THEN 'use' WHEN correct = 1 THEN 'correct' END AS d
                        FROM eval_question_scores WHERE eval_run_id = ? AND k = 3 AND question_id = ?
                        ORDER BY system""",
        [latest, qid],
    )
    assert dict(overview.select("system", diagnosis).iter_rows()) == dict(want.iter_rows())
    assert set(want["d"]) <= {"write", "read", "use", "correct"}


@pytest.mark.prefect
def test_inspector_locomo_cells_name_the_turn(reading, full: Path) -> None:
    reading(full)
    latest = _latest_eval(full, "locomo")
    qid = sql(
        full,
        "SELECT question_id FROM eval_retrievals WHERE eval_run_id = ? AND system = 'bm25' "
        "AND json_array_length(retrieved_trace_ids) >= 3 ORDER BY question_id LIMIT 1",
        [latest],
    )["question_id"][0]
    at = app("Question inspector", benchmark="locomo", question=qid)
    at.selectbox(key=f"qi_k_{latest}").set_value(3).run()
    assert_clean(at, "Question inspector")
    cells = next(df for chart in charts(at) for df in chart.values() if "cell" in df.columns)
    turns = sql(
        full,
        "SELECT trace_id, external_id FROM traces WHERE trace_id IN (SELECT unnest(?))",
        [cells["trace_id"].to_list()],
    )
    assert dict(cells.select("trace_id", "cell").iter_rows()) == dict(turns.iter_rows())
    assert "conversation_turn" not in cells["cell"].to_list()


@pytest.mark.prefect
def test_inspector_filters_questions_a_system_failed(reading, full: Path) -> None:
    reading(full)
    latest = _latest_eval(full, "tiny")
    at = app("Question inspector", benchmark="tiny")
    at.selectbox(key=f"qi_k_{latest}").set_value(3).run()
    total = len(at.selectbox(key="qi_question").options)
    for failure, condition in (
        ("wrong (not correct)", "correct = 0"),
        ("failed at read", "read_failure = 1"),
    ):
        at.selectbox(key="qi_failed_system").set_value("bm25").run()
        at.selectbox(key="qi_failure").set_value(failure).run()
        assert_clean(at, "Question inspector")
        want = set(
            sql(
                full,
                f"SELECT question_id FROM eval_question_scores WHERE eval_run_id = ? AND system = 'bm25' "
                f"AND k = 3 AND {condition}",
                [latest],
            )["question_id"]
        )
        if want:
            assert set(at.selectbox(key="qi_question").options) and len(
                at.selectbox(key="qi_question").options
            ) == len(want)
            assert at.selectbox(key="qi_question").value in want
            assert len(want) < total
        else:
            assert "No questions match." in [i.value for i in at.info]


# -- offline answerer and judge --------------------------------------------------------------------------


@pytest.mark.prefect
def test_figures_of_the_offline_answerer_and_judge_say_so(reading, full: Path) -> None:
    reading(full)
    latest = _latest_eval(full, "tiny")
    offline = sql(
        full, "SELECT bool_and(is_offline) AS a FROM eval_answers WHERE eval_run_id = ?", [latest]
    )["a"][0]
    judge = sql(
        full,
        "SELECT bool_and(is_offline) AS j FROM llm_calls WHERE run_id = ? AND role = 'judge'",
        [latest],
    )["j"][0]
    assert offline and judge  # the offline provider: heuristics, not models
    at = app("Leaderboard", benchmark="tiny")
    assert any("Offline heuristics, not language models" in w.value for w in at.warning)
    options = at.selectbox(key="lb_metric").options
    assert "choice_accuracy (offline answerer)" in options and "recall_flat" in options
    assert (
        "mem_recall (offline judge)" in options
        and "qa_consistency (offline answerer + judge)" in options
    )
    wide = frame(at, "rank", "system", "choice_accuracy (offline answerer)")
    assert "recall_flat" in wide.columns
    at = app("Question inspector", benchmark="tiny")
    labels = [e.label for e in at.expander]
    assert any(lbl == "Answers in full (offline answerer)" for lbl in labels)
    assert any(lbl.startswith("Judge verdicts (offline judge)") for lbl in labels)
    assert "correct (offline answerer)" in frame(at, "system", "gold_found").columns


# -- Leaderboard -------------------------------------------------------------------------------------------


@pytest.mark.prefect
def test_leaderboard_ranks_by_the_headline_and_keeps_the_diagnosis_apart(
    reading, full: Path
) -> None:
    reading(full)
    latest = _latest_eval(full, "tiny")
    at = app("Leaderboard", benchmark="tiny")
    k = at.selectbox(key=f"lb_k_{latest}").value
    headline = "recall_flat"
    scores = frame(at, "rank", "system", headline)
    want = sql(
        full,
        "SELECT system, value FROM eval_metrics WHERE eval_run_id = ? AND group_by = 'all' "
        "AND metric = ? AND k = ? ORDER BY value DESC, system",
        [latest, headline, k],
    )
    assert scores["system"].to_list() == want["system"].to_list()
    assert scores[headline].to_list() == want["value"].to_list()
    assert not {"write_failure", "read_failure", "utilization_failure", "correct"} & {
        c.split(" (")[0] for c in scores.columns
    }
    diagnosis = frame(at, "rank", "system", "correct (offline answerer + judge)")
    assert [c.split(" (")[0] for c in diagnosis.columns] == [
        "rank",
        "system",
        "write_failure",
        "read_failure",
        "utilization_failure",
        "correct",
    ]
    assert diagnosis["system"].to_list() == want["system"].to_list()


@pytest.mark.prefect
def test_leaderboard_groups_locomo_by_its_own_categories(reading, full: Path) -> None:
    reading(full)
    latest = _latest_eval(full, "locomo")
    at = app("Leaderboard", benchmark="locomo")
    assert "source category" in at.radio(key="lb_group").options
    at.radio(key="lb_group").set_value("source category").run()
    assert_clean(at, "Leaderboard")
    k = at.selectbox(key=f"lb_k_{latest}").value
    metric = at.selectbox(key="lb_metric").value
    shown = frame(at, "group_value", "system", "value", "ci_low").sort("group_value", "system")
    want = sql(
        full,
        f"""SELECT q.source_category::VARCHAR || ' ' || coalesce(q.source_question_type, '') AS group_value,
                               s.system, count(s.{metric}) AS n, avg(s.{metric}) AS value
                        FROM eval_question_scores s JOIN questions q USING (question_id)
                        WHERE s.eval_run_id = ? AND s.k = ? GROUP BY ALL ORDER BY group_value, system""",
        [latest, k],
    )
    assert (
        shown.select("group_value", "system", "n").to_dicts()
        == want.select("group_value", "system", "n").to_dicts()
    )
    assert shown["value"].to_list() == pytest.approx(want["value"].to_list())
    assert want["group_value"].n_unique() >= 2
    assert all(r["ci_low"] <= r["value"] + 1e-12 for r in shown.iter_rows(named=True))
    # a benchmark without source categories does not offer the grouping
    at = app("Leaderboard", benchmark="tiny")
    assert "source category" not in at.radio(key="lb_group").options
