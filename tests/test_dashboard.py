"""The dashboard: every page under Streamlit's AppTest shows what SQL over the same warehouse says, on a
generated benchmark (with its internals, gate runs and two evaluations), on imported release and LoCoMo
benchmarks, and on an empty or missing warehouse; then every page in a real headless Chromium."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import polars as pl
import pytest
from typer.testing import CliRunner

from clonemem.cli import app as cli_app
from clonemem.dashboard import PAGES, analysis, command, context
from clonemem.qa.land import cue_stats
from clonemem.schemas import question_types
from clonemem.warehouse import Warehouse
from clonemem.warehouse.guard import SqlRefused, open_guarded
from tests.dashboard_kit import (
    app,
    assert_clean,
    benchmark_id,
    charts,
    descendants,
    frame,
    free_port,
    imported_warehouse,
    metrics,
    sql,
    stop,
    texts,
    wait_healthy,
)
from tests.shared_kit import copy_warehouse

TITLES = [title for title, _script, _url in PAGES]


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> Path:
    return imported_warehouse(tmp_path_factory.mktemp("dash-imported") / "wh.duckdb")


@pytest.fixture(scope="module")
def full(tmp_path_factory, full_once: Path) -> Path:
    return copy_warehouse(full_once, tmp_path_factory.mktemp("dash-full") / "wh.duckdb")


@pytest.fixture
def reading(monkeypatch):
    """Point the app at a warehouse (the way `clonemem dashboard` passes it, through the environment
    fallback here; the argv form is tested on its own)."""

    def use(path: Path) -> Path:
        monkeypatch.setenv("CLONEMEM_WAREHOUSE", str(path))
        return path

    return use


# -- no warehouse, an empty one, an unknown benchmark --------------------------------------------------


@pytest.mark.parametrize("page", TITLES)
def test_missing_warehouse_says_so_on_every_page(reading, tmp_path: Path, page: str) -> None:
    reading(tmp_path / "nowhere.duckdb")
    at = app(page)
    assert f"no warehouse at {tmp_path / 'nowhere.duckdb'}" in texts(at)
    assert not (tmp_path / "nowhere.duckdb").exists()  # the dashboard never creates one


def test_a_duckdb_file_that_is_not_a_warehouse(reading, tmp_path: Path) -> None:
    path = reading(tmp_path / "other.duckdb")
    duckdb.connect(str(path)).close()
    for page in TITLES:
        assert "is not a clonemem warehouse yet" in texts(app(page))


def test_empty_warehouse_every_page_says_there_is_nothing_yet(reading, tmp_path: Path) -> None:
    path = reading(tmp_path / "empty.duckdb")
    Warehouse.open_writer(path).close()
    for page in TITLES:
        at = app(page)
        if page == "Runs":
            assert metrics(at) == {
                "pipeline runs": "0",
                "stage runs": "0",
                "evaluations": "0",
                "LLM calls": "0",
            }
        elif page == "Gym":  # gym runs stand apart from benchmarks
            assert "No gym runs yet" in texts(at)
        else:
            assert "No benchmarks in" in texts(at)


def test_unknown_benchmark_is_named_with_the_known_ones(reading, imported: Path) -> None:
    reading(imported)
    for page in ("Generation", "Leaderboard"):
        at = app(page, benchmark="nope")
        assert [e.value for e in at.error] == [
            f"no benchmark 'nope' in {imported.name} (known: locomo, release); pick one in the sidebar"
        ]


# -- imported benchmarks ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["release", "locomo"])
@pytest.mark.parametrize("page", TITLES)
def test_every_page_renders_an_imported_benchmark(
    reading, imported: Path, page: str, name: str
) -> None:
    reading(imported)
    app(page, benchmark=name)


def test_benchmarks_page_lists_what_sql_lists(reading, imported: Path) -> None:
    reading(imported)
    at = app("Benchmarks", benchmark="release")
    shown = frame(at, "name", "source", "gate_status").select(
        "name", "source", "gate_status", "personas", "traces", "questions"
    )
    want = sql(
        imported,
        "SELECT name, source, gate_status, personas, traces, questions FROM v_benchmarks ORDER BY name",
    )
    assert shown.to_dicts() == want.to_dicts()
    release_row = want.filter(pl.col("name") == "release").row(0, named=True)
    got = metrics(at)
    assert (got["personas"], got["traces"], got["questions"]) == tuple(
        str(release_row[k]) for k in ("personas", "traces", "questions")
    )
    assert "No LLM calls are recorded for this benchmark's runs (an import makes none)." in texts(
        at
    )
    hash_ = sql(
        imported,
        "SELECT left(sha256(config_json::VARCHAR), 12) AS h FROM benchmarks WHERE name = 'release'",
    )
    assert f"config hash `{hash_['h'][0]}`" in texts(at)


def test_generation_page_on_an_import_says_what_is_missing(reading, imported: Path) -> None:
    reading(imported)
    at = app("Generation", benchmark="locomo")
    assert (
        "Benchmark 'locomo' was imported (a release or LoCoMo file): it has no life arcs, phases or major events"
        in texts(at)
    )
    pid = sql(
        imported,
        "SELECT persona_id FROM personas p JOIN benchmarks b USING (benchmark_id) "
        "WHERE b.name = 'locomo' ORDER BY p.seq LIMIT 1",
    )["persona_id"][0]
    assert at.selectbox(key="gen_persona").value == pid
    monthly = charts(at)
    assert len(monthly) == 1  # no timeline: only traces per month
    data = next(iter(monthly[0].values()))
    want = sql(
        imported,
        "SELECT medium, count(*) AS n FROM traces WHERE persona_id = ? GROUP BY ALL",
        [pid],
    )
    assert dict(data.group_by("medium").agg(pl.col("traces").sum()).iter_rows()) == dict(
        want.iter_rows()
    )
    assert f"{int(want['n'].sum())} traces match" in texts(at)


def test_qa_page_on_a_release_cues_equal_the_gates_statistics(reading, imported: Path) -> None:
    reading(imported)
    at = app("QA quality", benchmark="release")
    assert (
        "Benchmark 'release' was imported: its questions came through no quality control"
        in texts(at)
    )
    assert (
        "Benchmark 'release' has never been gated (gate status pending); run `clonemem gate release`."
        in texts(at)
    )
    with Warehouse.open_reader(imported) as wh:
        stats = cue_stats(wh, benchmark_id(imported, "release"))
    cues = frame(at, "cue", "accuracy")
    assert cues["accuracy"].round(4).to_list() == [
        stats.longest_option_accuracy,
        stats.overlap_option_accuracy,
    ]
    assert cues["items"].to_list() == [stats.items_correct_in_a_to_d] * 2
    letters = frame(at, "letter", "share")
    dist = stats.correct_letter_distribution
    assert dict(zip(letters["letter"], letters["items"])) == {k: dist.get(k, 0) for k in "ABCD"}
    comp = frame(at, "question_type", "dimension", "questions")
    want = sql(
        imported,
        "SELECT question_type, dimension, questions FROM v_question_composition "
        "WHERE benchmark = 'release' ORDER BY question_type, dimension",
    )
    assert comp.select("question_type", "dimension", "questions").to_dicts() == want.to_dicts()
    declared = len(question_types.names())  # the caption counts the registry, not prose
    assert f"outside the {declared} declared types (self_reflection)" in texts(at)


def test_inspector_on_an_import_shows_question_options_and_evidence(
    reading, imported: Path
) -> None:
    reading(imported)
    bid = benchmark_id(imported, "release")
    qid = sql(
        imported,
        "SELECT question_id FROM questions WHERE benchmark_id = ? AND correct_choice_id IS NOT NULL "
        "ORDER BY seq LIMIT 1",
        [bid],
    )["question_id"][0]
    at = app("Question inspector", benchmark="release", question=qid)
    assert at.selectbox(key="qi_question").value == qid
    choices = pl.from_pandas(
        at.table[0].value.reset_index(drop=True)
    )  # a static table: options wrap in full
    want = sql(
        imported,
        "SELECT c.choice_id, c.text, c.choice_id = q.correct_choice_id AS correct FROM question_choices c "
        "JOIN questions q USING (question_id) WHERE question_id = ? ORDER BY c.seq",
        [qid],
    )
    assert choices.to_dicts() == want.to_dicts()
    statements = sql(
        imported,
        "SELECT e.statement FROM question_evidence qe JOIN evidence e USING (evidence_id) "
        "WHERE qe.question_id = ? ORDER BY qe.seq",
        [qid],
    )["statement"].to_list()
    labels = [e.label for e in at.expander]
    assert [
        lbl.split(". ", 1)[1].rsplit("  (", 1)[0] for lbl in labels if lbl[0].isdigit()
    ] == statements
    assert "Benchmark 'release' has not been evaluated" in texts(at)


def test_reading_beside_a_running_writer_uses_a_snapshot(
    reading, imported: Path, tmp_path: Path
) -> None:
    """Another process holds the warehouse for writing (and has just committed a new benchmark): the
    dashboard reads a snapshot with it, and the writer is not blocked by the dashboard."""
    path = reading(shutil.copy(imported, tmp_path / "live.duckdb"))
    writer = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert writer.stdout.readline().strip() == "ready"
        at = app("Benchmarks")
        assert "a snapshot: another process is writing it" in at.sidebar.caption[0].value
        assert "late" in frame(at, "name")["name"].to_list()
        writer.stdin.write("go\n")
        writer.stdin.flush()
        assert writer.stdout.readline().strip() == "wrote again"
    finally:
        writer.stdin.close()
        writer.wait(30)
    assert writer.returncode == 0
    assert "a snapshot" not in app("Benchmarks").sidebar.caption[0].value


_WRITER = """
import sys
from clonemem.importers import import_files
from clonemem.importers.base import ImportFailed
from clonemem.exporters.release import export_release
from clonemem.importers.locomo import project_type
from clonemem import ids
from clonemem.demo import fixture_files
from clonemem.warehouse import Warehouse
with Warehouse.open_writer(sys.argv[1]) as wh:
    import_files(wh, "release", fixture_files(), "late")
    print("ready", flush=True)
    sys.stdin.readline()
    import_files(wh, "release", fixture_files(), "later")
    print("wrote again", flush=True)
"""


# -- a generated benchmark, gated and evaluated ---------------------------------------------------------


@pytest.mark.prefect
@pytest.mark.parametrize("page", TITLES)
def test_every_page_renders_the_generated_benchmark(reading, full: Path, page: str) -> None:
    reading(full)
    at = app(page, benchmark="tiny")
    assert not at.error


@pytest.mark.prefect
def test_benchmarks_page_spend_equals_llm_calls_of_the_benchmarks_runs(reading, full: Path) -> None:
    reading(full)
    at = app("Benchmarks", benchmark="tiny")
    bid = benchmark_id(full, "tiny")
    want = sql(
        full,
        """
        SELECT role, count(*) AS calls, sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens
        FROM llm_calls WHERE run_id IN (SELECT run_id FROM runs WHERE benchmark_id = $1
                                        UNION SELECT eval_run_id FROM eval_runs WHERE benchmark_id = $1)
        GROUP BY ALL ORDER BY role""",
        [bid],
    )
    shown = frame(at, "role", "provider", "model", "calls").select(
        "role", "calls", "input_tokens", "output_tokens"
    )
    assert shown.sort("role").to_dicts() == want.to_dicts()
    assert metrics(at)["calls"] == f"{int(want['calls'].sum()):,}"
    # content of the offline provider is labelled as such wherever it appears
    assert "tiny (generated, gate passed, offline)" in at.sidebar.selectbox(key="benchmark").options
    assert "release (imported, gate pending)" in at.sidebar.selectbox(key="benchmark").options
    # every call names the run that made it (generation, stage IV, evaluation), so none is left unowned
    loose = sql(full, "SELECT count(*) AS n FROM llm_calls WHERE run_id IS NULL")["n"][0]
    assert loose == 0 and not any("name no benchmark" in e.label for e in at.expander)


@pytest.mark.prefect
def test_generation_page_timeline_and_trace_browser_equal_sql(reading, full: Path) -> None:
    reading(full)
    at = app("Generation", benchmark="tiny")
    pid = at.selectbox(key="gen_persona").value
    counts = sql(
        full,
        """
        SELECT (SELECT count(*) FROM life_arcs WHERE persona_id = $1) AS arcs,
               (SELECT count(*) FROM major_events WHERE persona_id = $1) AS "major events",
               (SELECT count(*) FROM phases JOIN major_events USING (major_event_id) WHERE persona_id = $1) AS phases,
               (SELECT count(*) FROM evidence WHERE persona_id = $1) AS evidence,
               (SELECT count(*) FROM traces WHERE persona_id = $1) AS traces""",
        [pid],
    ).row(0, named=True)
    shown = metrics(at)
    assert {k: shown[k] for k in counts} == {k: f"{v:,}" for k, v in counts.items()}
    timeline, monthly = charts(at)
    sizes = sorted(df.height for df in timeline.values())
    aligned = sql(
        full,
        "SELECT count(*) AS n FROM major_event_arcs JOIN major_events USING (major_event_id) "
        "WHERE persona_id = ?",
        [pid],
    )["n"][0]
    assert sizes == sorted([aligned, counts["phases"], counts["major events"]])
    assert int(next(iter(monthly.values()))["traces"].sum()) == counts["traces"]
    assert f"{counts['traces']} traces match" in texts(at)

    # filter to one medium, then read a trace that questions cite as evidence
    cited = sql(
        full,
        """
        SELECT t.trace_id, t.medium, count(DISTINCT qe.question_id) AS n FROM traces t
        JOIN evidence_traces et USING (trace_id) JOIN question_evidence qe USING (evidence_id)
        WHERE t.persona_id = ? GROUP BY ALL ORDER BY n DESC, t.trace_id LIMIT 1""",
        [pid],
    ).row(0, named=True)
    at.multiselect(key=f"gen_media_{pid}").set_value([cited["medium"]]).run()
    assert_clean(at, "Generation")
    in_medium = sql(
        full,
        "SELECT count(*) AS n FROM traces WHERE persona_id = ? AND medium = ?",
        [pid, cited["medium"]],
    )["n"][0]
    assert f"{in_medium} traces match" in texts(at)
    at.selectbox(key=f"gen_trace_{pid}").set_value(cited["trace_id"]).run()
    assert_clean(at, "Generation")
    content = sql(full, "SELECT content FROM traces WHERE trace_id = ?", [cited["trace_id"]])[
        "content"
    ][0]
    assert content in [t.value for t in at.text]
    citing = frame(at, "external_id", "question_type", "as_evidence")
    want = sql(
        full,
        """
        SELECT DISTINCT q.external_id FROM questions q JOIN question_evidence qe USING (question_id)
        JOIN evidence_traces et USING (evidence_id) WHERE et.trace_id = ?
        UNION SELECT q.external_id FROM questions q JOIN question_traces qt USING (question_id) WHERE qt.trace_id = ?""",
        [cited["trace_id"], cited["trace_id"]],
    )
    assert (
        set(citing["external_id"]) == set(want["external_id"])
        and citing["question_type"].n_unique() >= 1
    )
    assert f"Cited by {cited['n']} question(s)" in texts(at)


@pytest.mark.prefect
def test_qa_page_funnel_cues_composition_and_gate_equal_sql(reading, full: Path) -> None:
    reading(full)
    at = app("QA quality", benchmark="tiny")
    bid = benchmark_id(full, "tiny")
    want = sql(
        full,
        """
        WITH r AS (SELECT r.* FROM qa_rejected r JOIN personas p USING (persona_id) WHERE p.benchmark_id = $1)
        SELECT (SELECT count(*) FROM questions WHERE benchmark_id = $1) AS accepted,
               (SELECT count(*) FROM r WHERE stage = 'sufficiency') AS rejected_sufficiency,
               (SELECT count(*) FROM r WHERE stage = 'distractors') AS rejected_distractors,
               (SELECT count(*) FROM r WHERE stage = 'format') AS rejected_format,
               (SELECT count(*) FROM r) AS rejected""",
        [bid],
    ).row(0, named=True)
    shown = metrics(at)
    assert shown["accepted"] == f"{want['accepted']:,}"
    assert shown["planned"] == f"{want['accepted'] + want['rejected']:,}"
    for stage in ("rejected_sufficiency", "rejected_distractors", "rejected_format"):
        assert shown[stage.replace("_", " ")] == f"{want[stage]:,}"
    by_type = frame(at, "question_type", "dimension", "planned", "accepted")
    accepted = sql(
        full,
        "SELECT question_type, dimension, count(*) AS n FROM questions WHERE benchmark_id = ? "
        "GROUP BY ALL",
        [bid],
    )
    assert {
        (r["question_type"], r["dimension"]): r["accepted"]
        for r in by_type.iter_rows(named=True)
        if r["accepted"]
    } == {(t, d): n for t, d, n in accepted.iter_rows()}
    infeasible = sql(
        full,
        "SELECT max(json_extract(summary, '$.status.infeasible')::BIGINT) AS n FROM qa_landings "
        "WHERE benchmark_id = ?",
        [bid],
    )["n"][0]
    assert infeasible and f"another {infeasible} candidate(s) were judged infeasible" in texts(at)

    with Warehouse.open_reader(full) as wh:
        stats = cue_stats(wh, bid)
    cues = frame(at, "cue", "accuracy", "ci_low", "ci_high")
    assert cues["accuracy"].round(4).to_list() == [
        stats.longest_option_accuracy,
        stats.overlap_option_accuracy,
    ]
    lo, hi = analysis.wilson(
        stats.longest_option_accuracy * stats.items_correct_in_a_to_d, stats.items_correct_in_a_to_d
    )
    assert (round(cues["ci_low"][0], 4), round(cues["ci_high"][0], 4)) == (
        round(lo, 4),
        round(hi, 4),
    )

    media = frame(at, "medium", "traces", "cited_as_evidence")
    want_media = sql(full, "SELECT medium, traces FROM v_trace_media WHERE benchmark = 'tiny'")
    assert dict(media.select("medium", "traces").iter_rows()) == dict(want_media.iter_rows())

    # the gate: the latest run passed; the strict one failed, each failure with its samples
    runs = sql(
        full,
        "SELECT gate_run_id, status FROM gate_runs WHERE benchmark_id = ? ORDER BY started_at DESC",
        [bid],
    )
    assert runs["status"].to_list() == ["passed", "failed"]
    results = sql(
        full,
        "SELECT count(*) AS n, count(*) FILTER (WHERE NOT success) AS failed FROM gate_results "
        "WHERE gate_run_id = ?",
        [runs["gate_run_id"][0]],
    ).row(0)
    assert (metrics(at)["expectations"], metrics(at)["failed"]) == (
        str(results[0]),
        str(results[1]),
    )
    at.selectbox(key="qa_gate_run").set_value(runs["gate_run_id"][1]).run()
    assert_clean(at, "QA quality")
    failed = sql(
        full,
        "SELECT suite, expectation, failing_sample::VARCHAR AS sample FROM gate_results "
        "WHERE gate_run_id = ? AND NOT success ORDER BY suite, expectation",
        [runs["gate_run_id"][1]],
    )
    assert failed.height >= 2 and metrics(at)["failed"] == str(failed.height)
    boxes = [e for e in at.expander if e.label.startswith("failed: ")]
    assert [b.label.split(" (")[0] for b in boxes] == [
        f"failed: {s} / {e}" for s, e in zip(failed["suite"], failed["expectation"])
    ]
    assert [b.json[0].value for b in boxes] == [json.dumps(json.loads(s)) for s in failed["sample"]]
    table = frame(at, "suite", "expectation", "success")
    assert (
        table.height
        == sql(
            full,
            "SELECT count(*) AS n FROM gate_results WHERE gate_run_id = ?",
            [runs["gate_run_id"][1]],
        )["n"][0]
    )


@pytest.mark.prefect
def test_inspector_retrieval_at_k_answers_and_judge_equal_the_stored_evaluation(
    reading, full: Path
) -> None:
    reading(full)
    bid = benchmark_id(full, "tiny")
    latest = sql(
        full,
        "SELECT eval_run_id FROM eval_runs WHERE benchmark_id = ? ORDER BY started_at DESC LIMIT 1",
        [bid],
    )["eval_run_id"][0]
    # a question that bm25 finds some but not all of at k = 3: gold marks must be right, not all-or-nothing
    qid = sql(
        full,
        """SELECT question_id FROM eval_question_metrics WHERE eval_run_id = ? AND system = 'bm25'
                       AND k = 3 AND metric = 'recall_flat' AND value > 0 ORDER BY value, question_id LIMIT 1""",
        [latest],
    )["question_id"][0]
    at = app("Question inspector", benchmark="tiny", question=qid)
    assert at.selectbox(key="qi_eval").value == latest
    at.selectbox(key=f"qi_k_{latest}").set_value(3).run()
    assert_clean(at, "Question inspector")
    overview = frame(at, "system", "gold_found", "recall_flat")
    overview = overview.rename(
        {c: c.split(" (offline")[0] for c in overview.columns}
    )  # offline labels off
    stored = sql(
        full,
        """
        SELECT m.system, m.value AS recall_flat, a.predicted_choice_id FROM eval_question_metrics m
        JOIN eval_answers a USING (eval_run_id, system, k, question_id)
        WHERE m.eval_run_id = ? AND m.k = 3 AND m.question_id = ? AND m.metric = 'recall_flat' ORDER BY m.system""",
        [latest, qid],
    )
    assert (
        overview.select("system", "recall_flat", "predicted_choice_id").sort("system").to_dicts()
        == stored.to_dicts()
    )
    judged = sql(
        full,
        "SELECT system, score FROM eval_judgments WHERE eval_run_id = ? AND k = 3 AND question_id = ? "
        "AND metric = 'qa_consistency' ORDER BY system",
        [latest, qid],
    )
    assert (
        overview.sort("system").select("system", "qa_consistency").to_dicts()
        == judged.rename({"score": "qa_consistency"}).to_dicts()
    )
    ranked = frame(at, "system", "rank", "gold", "external_id")
    gold = set(
        sql(
            full,
            "SELECT t.external_id FROM question_traces JOIN traces t USING (trace_id) "
            "WHERE question_id = ?",
            [qid],
        )["external_id"]
    )
    assert ranked.height <= 2 * 3 and ranked["rank"].max() <= 3
    assert all(r["gold"] == (r["external_id"] in gold) for r in ranked.iter_rows(named=True))


@pytest.mark.prefect
def test_leaderboard_values_intervals_groups_efficiency_and_comparison_equal_sql(
    reading, full: Path
) -> None:
    reading(full)
    at = app("Leaderboard", benchmark="tiny")
    bid = benchmark_id(full, "tiny")
    runs = sql(
        full,
        "SELECT eval_run_id FROM eval_runs WHERE benchmark_id = ? ORDER BY started_at DESC",
        [bid],
    )["eval_run_id"].to_list()
    assert (
        at.selectbox(key="lb_eval").value == runs[0]
        and at.selectbox(key="lb_metric").value == "recall_flat"
    )
    want = sql(
        full,
        "SELECT system, k, n, value, ci_low, ci_high FROM eval_metrics WHERE eval_run_id = ? "
        "AND group_by = 'all' AND metric = 'recall_flat' ORDER BY system, k",
        [runs[0]],
    )
    shown = frame(at, "system", "k", "n", "value", "ci_low", "ci_high").sort("system", "k")
    assert shown.select(want.columns).to_dicts() == want.to_dicts()
    # the evaluation's own chart (the board's above it draws one k of each system's latest evaluation)
    plotted = next(
        df
        for chart in charts(at)
        for df in chart.values()
        if "k" in df.columns and df["k"].n_unique() > 1
    ).select(want.columns)
    assert plotted.sort("system", "k").to_dicts() == want.to_dicts()

    at.selectbox(key="lb_metric").set_value("choice_accuracy").run()
    at.radio(key="lb_group").set_value("dimension").run()
    assert_clean(at, "Leaderboard")
    k = at.selectbox(key=f"lb_k_{runs[0]}").value
    groups = frame(at, "group_value", "system", "value", "ci_low").sort("group_value", "system")
    want_groups = sql(
        full,
        "SELECT group_value, system, n, value, ci_low, ci_high FROM eval_metrics WHERE "
        "eval_run_id = ? AND group_by = 'dimension' AND metric = 'choice_accuracy' AND k = ? "
        "ORDER BY group_value, system",
        [runs[0], k],
    )
    assert groups.select(want_groups.columns).to_dicts() == want_groups.to_dicts()

    eff = frame(at, "system", "build_seconds", "retrieval_p95_ms").sort("system", "k")
    want_eff = sql(
        full,
        """SELECT s.system, a.k, avg(a.context_tokens) AS context_tokens, s.build_seconds,
                                   s.retrieval_p50_ms, s.retrieval_p95_ms, s.llm_calls
                            FROM eval_system_stats s JOIN eval_answers a USING (eval_run_id, system)
                            WHERE s.eval_run_id = ? GROUP BY ALL ORDER BY s.system, a.k""",
        [runs[0]],
    )
    assert eff.select(want_eff.columns).to_dicts() == want_eff.to_dicts()

    assert at.selectbox(key="lb_other").value == runs[1]
    at.selectbox(key="lb_compare_k").set_value(1).run()
    side = frame(at, "system", "value_a", "value_b", "difference").sort("system")
    pair = sql(
        full,
        """SELECT a.system, a.value AS value_a, b.value AS value_b FROM eval_metrics a JOIN eval_metrics b
                        USING (system, k, group_by, metric) WHERE a.eval_run_id = ? AND b.eval_run_id = ? AND k = 1
                        AND group_by = 'all' AND metric = 'choice_accuracy' ORDER BY system""",
        runs[:2],
    )
    assert side.select("system", "value_a", "value_b").to_dicts() == pair.to_dicts()


@pytest.mark.prefect
def test_runs_page_lists_runs_and_calls_per_stage(reading, full: Path) -> None:
    reading(full)
    at = app("Runs")
    counts = sql(
        full,
        "SELECT (SELECT count(*) FROM runs WHERE kind = 'pipeline') AS p, "
        "(SELECT count(*) FROM runs WHERE kind <> 'pipeline') AS r, (SELECT count(*) FROM eval_runs) AS e, "
        "(SELECT count(*) FROM llm_calls) AS c",
    ).row(0)
    assert metrics(at) == {
        "pipeline runs": f"{counts[0]:,}",
        "stage runs": f"{counts[1]:,}",
        "evaluations": f"{counts[2]:,}",
        "LLM calls": f"{counts[3]:,}",
    }
    pipeline = frame(at, "kind", "flow_run_id", "seconds")
    want = sql(
        full,
        "SELECT run_id, flow_run_id, date_diff('millisecond', started_at, finished_at) / 1000.0 AS seconds "
        "FROM runs ORDER BY run_id",
    )
    assert (
        pipeline.select("run_id", "flow_run_id", "seconds").sort("run_id").to_dicts()
        == want.to_dicts()
    )
    assert "summary.llm_calls" in pipeline.columns
    per_stage = frame(at, "run", "stage", "calls")
    want_stage = sql(full, "SELECT stage, count(*) AS calls FROM llm_calls GROUP BY ALL")
    assert dict(per_stage.group_by("stage").agg(pl.col("calls").sum()).iter_rows()) == dict(
        want_stage.iter_rows()
    )
    at.toggle(key="runs_only").set_value(
        True
    ).run()  # the sidebar benchmark is the first by name: locomo
    assert metrics(at)[
        "pipeline runs"
    ] == "0" and "No pipeline runs recorded for this benchmark" in texts(at)


def test_runs_page_shows_prefect_columns_another_version_adds(
    reading, imported: Path, tmp_path: Path
) -> None:
    """A schema with more run columns shows them with no code change (runs.deployment_id came with
    migration 0010; eval_runs.flow_run_id stands for a column a later version adds)."""
    path = reading(shutil.copy(imported, tmp_path / "newer.duckdb"))
    con = duckdb.connect(str(path))
    con.execute("ALTER TABLE eval_runs ADD COLUMN flow_run_id VARCHAR")
    con.execute(
        "INSERT INTO runs (run_id, kind, benchmark_id, flow_run_id, status, started_at, finished_at, deployment_id) "
        "SELECT 'r1', 'import', benchmark_id, 'f-1', 'completed', TIMESTAMP '2026-01-01 10:00:00', "
        "TIMESTAMP '2026-01-01 10:00:03', 'dep-7' FROM benchmarks WHERE name = 'release'"
    )
    con.close()
    at = app("Runs")
    row = frame(at, "deployment_id", "flow_run_id").row(0, named=True)
    assert (row["deployment_id"], row["flow_run_id"], row["seconds"], row["benchmark"]) == (
        "dep-7",
        "f-1",
        3.0,
        "release",
    )
    assert "Prefect ids shown: flow_run_id, deployment_id" in texts(at)


# -- pieces ------------------------------------------------------------------------------------------------


def test_warehouse_path_from_argv_then_environment(monkeypatch) -> None:
    monkeypatch.setenv("CLONEMEM_WAREHOUSE", "/env/wh.duckdb")
    assert context.warehouse_path(["--warehouse", "/a/b.duckdb"]) == Path("/a/b.duckdb")
    assert context.warehouse_path(["--warehouse=/c.duckdb"]) == Path("/c.duckdb")
    assert context.warehouse_path([]) == Path("/env/wh.duckdb")
    monkeypatch.delenv("CLONEMEM_WAREHOUSE")
    assert context.warehouse_path([]) == Path("clonemem.duckdb")


def test_cli_starts_streamlit_on_loopback_headless(monkeypatch, tmp_path: Path) -> None:
    got: list[list[str]] = []
    monkeypatch.setattr(os, "execv", lambda exe, argv: got.append(argv))
    result = CliRunner().invoke(
        cli_app, ["dashboard", "--warehouse", str(tmp_path / "w.duckdb"), "--port", "8765"]
    )
    assert result.exit_code == 0, result.output
    argv = got[0]
    assert argv[:4] == [
        sys.executable,
        "-m",
        "clonemem.dashboard.serve",
        "run",
    ]  # Streamlit's run, guarded
    assert argv[4].endswith("clonemem/dashboard/app.py")
    opts = dict(zip(argv[5 : argv.index("--")], argv[6 : argv.index("--")]))
    assert opts["--server.address"] == "127.0.0.1" and opts["--server.port"] == "8765"
    assert opts["--server.headless"] == "true" and opts["--browser.gatherUsageStats"] == "false"
    assert opts["--server.enableXsrfProtection"] == "true" and opts["--server.enableCORS"] == "true"
    assert argv[argv.index("--") + 1 :] == ["--warehouse", str((tmp_path / "w.duckdb").resolve())]
    assert "no warehouse at" in result.output
    assert command(Path("/w"), 1, "py")[-2:] == ["--warehouse", "/w"]


def test_guarded_frame_binds_parameters_and_still_refuses_writes(imported: Path) -> None:
    with open_guarded(imported) as db:
        assert db.frame("SELECT name FROM benchmarks WHERE name = ?", ["release"])[
            "name"
        ].to_list() == ["release"]
        assert (
            db.frame("SELECT name FROM benchmarks WHERE name = $n", {"n": "x' OR '1'='1"}).height
            == 0
        )
        with pytest.raises(SqlRefused):
            db.frame("DELETE FROM benchmarks WHERE name = ?", ["release"])
        with pytest.raises(SqlRefused):
            db.frame("SELECT * FROM read_text(?)", ["/etc/hostname"])


def test_two_sessions_read_one_warehouse_at_once(imported: Path) -> None:
    """Two page renders in one server process (two browser tabs): the second guarded connection shares
    the first one's database instance, already locked, and both stay locked down."""
    first = open_guarded(imported)
    second = open_guarded(imported)
    try:
        for db in (first, second):
            assert db.frame("SELECT count(*) AS n FROM benchmarks")["n"][0] == 2
            assert db.frame("SELECT current_setting('lock_configuration') AS l")["l"][0] is True
            with pytest.raises(SqlRefused):
                db.frame("SELECT * FROM read_text('/etc/hostname')")
        first.close()
        assert second.frame("SELECT count(*) AS n FROM traces")["n"][0] > 0
    finally:
        first.close()
        second.close()
    with open_guarded(imported) as third:  # a fresh instance once all are closed
        assert third.frame("SELECT current_setting('enable_external_access') AS e")["e"][0] is False


def test_wilson_interval_and_rank_cut() -> None:
    lo, hi = analysis.wilson(25, 100)
    assert (round(lo, 4), round(hi, 4)) == (0.1755, 0.3430)  # Wilson 95% of 25/100
    assert analysis.wilson(0, 0) == (None, None)
    assert analysis.ranked_at_k(json.dumps(["a", "b", "a", "c", "b", "d"]), 3) == ["a", "b", "c"]


# -- a real browser ------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.prefect
def test_every_page_in_headless_chromium(full: Path, tmp_path: Path) -> None:
    chromium = Path("/usr/bin/chromium")
    if not chromium.exists():
        if os.environ.get("CI"):
            pytest.fail("CI must have Debian's chromium (.ci/run installs it)")
        pytest.skip("Debian's chromium is not installed (apt-get install -y chromium)")
    from playwright.sync_api import sync_playwright

    from clonemem.flows.gym import gym_flow
    from clonemem.schemas.config import RunConfig

    # the evaluated benchmark and a small gym run beside it (the Gym page draws a gym run's charts)
    warehouse = tmp_path / "wh.duckdb"
    shutil.copy(full, warehouse)
    gym_flow(
        str(warehouse),
        ["bm25", "no_memory"],
        RunConfig.model_validate(
            {
                "name": "gym-tiny",
                "generation": {"personas": 1, "major_events": 2},
                "gym": {
                    "periods": 2,
                    "states_per_question": 2,
                    "turns_per_exposure": 1,
                    "questions": 2,
                    "variables": 4,
                },
            }
        ),
    )
    port = free_port()
    exe = str(Path(sys.executable).with_name("clonemem"))
    server = subprocess.Popen(
        [exe, "dashboard", "--warehouse", str(warehouse), "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    browser_pids: list[int] = []
    shots = tmp_path / "screenshots"
    shots.mkdir()
    try:
        wait_healthy(port, server)
        before = set(
            descendants(os.getpid())
        )  # e.g. Prefect's ephemeral server: not ours to stop here
        with sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=str(chromium),
                args=[
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-background-networking",
                    "--disable-component-update",
                    "--disable-sync",
                    "--no-first-run",
                ],
            )
            # the Playwright driver and the Chromium processes it started
            browser_pids = sorted(
                set(descendants(os.getpid())) - before - {server.pid} - set(descendants(server.pid))
            )
            assert browser_pids
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                for title, _script, url in PAGES:
                    page.goto(f"http://127.0.0.1:{port}/{url}?benchmark=tiny")
                    page.get_by_role("heading", name=title, exact=True).first.wait_for(
                        timeout=60_000
                    )
                    # every page of a generated, evaluated benchmark draws at least one chart
                    try:
                        page.locator('[data-testid="stVegaLiteChart"]').first.wait_for(
                            state="attached", timeout=60_000
                        )
                    except Exception as exc:
                        page.screenshot(path=str(tmp_path / "failed.png"))
                        raise AssertionError(
                            f"{title}: no chart drawn (see {tmp_path / 'failed.png'})"
                        ) from exc
                    page.wait_for_function(
                        "!document.querySelector('[data-testid=\"stStatusWidget\"]')",
                        timeout=60_000,
                    )
                    page.wait_for_timeout(500)
                    assert page.locator('[data-testid="stException"]').count() == 0, title
                    assert page.locator('[data-testid="stAlertContentError"]').count() == 0, title
                    page.screenshot(path=str(shots / f"{url or 'benchmarks'}.png"))
            finally:
                browser.close()
    finally:
        stop(server.pid)
        server.wait(10)
        for pid in browser_pids:
            stop(pid, timeout=2)
    assert sorted(p.name for p in shots.iterdir()) == sorted(
        f"{u or 'benchmarks'}.png" for _t, _s, u in PAGES
    )
    assert all(p.stat().st_size > 20_000 for p in shots.iterdir())
    assert not [p for p in browser_pids if Path(f"/proc/{p}").exists() and _alive(p)]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
