"""History and readable calls.

An evaluation re-run from the cache with nothing changed is not stored again (the command says so and
returns the earlier evaluation's id); the dashboard's History page draws each system's figures across
evaluations with a marker where the provenance changed; the Leaderboard's side-by-side view compares the
last two *different* evaluations. Offline calls keep their prompt and reply (live ones do not unless asked),
labelled with their question, so the Question inspector shows the judge's exchange and the Calls page
browses calls by run, stage and outcome."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import polars as pl
import pytest
from prefect.settings import PREFECT_TASKS_REFRESH_CACHE, temporary_settings
from pydantic import BaseModel
from typer.testing import CliRunner

from clonemem import prompts
from clonemem.cli import app as cli_app
from clonemem.llm.model import MemorySink, get_model
from clonemem.schemas.config import RunConfig
from tests.dashboard_kit import (
    app,
    assert_clean,
    benchmark_id,
    charts,
    frame,
    imported_warehouse,
    sql,
    texts,
)
from tests.fakeapi import FakeAPIServer

SECRET = "sk-test-3b9d0c7e1a5f"
EVALUATE = ("evaluate", "release", "--systems", "bm25,random", "--k", "1,3", "--force")


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory) -> dict:
    """The release fixture evaluated three times through the CLI in one process (one Prefect home, so later
    runs are served from the first one's cache): twice alike, then with the paper's aggregation."""
    folder = tmp_path_factory.mktemp("history")
    wh = imported_warehouse(folder / "wh.duckdb")
    runner = CliRunner()
    out: dict = {"wh": wh}
    for name, extra in (("first", ()), ("again", ()), ("personas", ("--aggregate", "personas"))):
        calls_before = sql(wh, "SELECT count(*) AS n FROM llm_calls")["n"][0]
        # the first run makes its calls whatever earlier tests of the session cached (a cached result's
        # calls land only in the warehouse they were made for); the later ones are served from its cache
        with temporary_settings(updates={PREFECT_TASKS_REFRESH_CACHE: name == "first"}):
            got = runner.invoke(
                cli_app,
                ["--warehouse", str(wh), *EVALUATE, *extra, "--json", str(folder / f"{name}.json")],
            )
        assert got.exit_code == 0, got.output
        out[name] = {
            "output": got.output,
            "json": json.loads((folder / f"{name}.json").read_text("utf-8")),
            "new_calls": sql(wh, "SELECT count(*) AS n FROM llm_calls")["n"][0] - calls_before,
        }
    return out


@pytest.fixture
def reading(monkeypatch):
    def use(path: Path) -> Path:
        monkeypatch.setenv("CLONEMEM_WAREHOUSE", str(path))
        return path

    return use


# -- history ---------------------------------------------------------------------------------------------


@pytest.mark.prefect
def test_an_identical_cached_re_evaluation_is_not_stored_again(evaluated: dict) -> None:
    wh, first, again, personas = (
        evaluated["wh"],
        evaluated["first"],
        evaluated["again"],
        evaluated["personas"],
    )
    assert first["new_calls"] > 0 and again["new_calls"] == 0  # the re-run came from the cache
    assert (
        again["json"]["eval_run_id"] == first["json"]["eval_run_id"]
        and again["json"]["reused"] is True
    )
    assert first["json"]["reused"] is False
    assert (
        f"identical to the latest stored one of 'release' ({first['json']['eval_run_id']}"
        in again["output"]
    )
    assert "not stored again" in again["output"] and "not stored again" not in first["output"]
    assert again["json"]["results"] == first["json"]["results"]
    # another aggregation is another evaluation
    assert (
        personas["json"]["eval_run_id"] != first["json"]["eval_run_id"]
        and not personas["json"]["reused"]
    )
    stored = sql(
        wh,
        "SELECT eval_run_id, fingerprint FROM eval_runs WHERE benchmark_id = ? ORDER BY started_at",
        [benchmark_id(wh, "release")],
    )
    assert stored["eval_run_id"].to_list() == [
        first["json"]["eval_run_id"],
        personas["json"]["eval_run_id"],
    ]
    assert stored["fingerprint"].null_count() == 0 and stored["fingerprint"].n_unique() == 2
    assert (
        sql(
            wh,
            "SELECT count(*) AS n FROM eval_metrics WHERE eval_run_id NOT IN (SELECT eval_run_id FROM eval_runs)",
        )["n"][0]
        == 0
    )


@pytest.mark.prefect
def test_history_page_draws_each_systems_series_with_intervals_and_a_change_marker(
    reading, evaluated: dict
) -> None:
    wh = reading(evaluated["wh"])
    at = app("History", benchmark="release")
    assert at.multiselect(key="hist_metrics").value == [
        "recall_flat",
        "choice_accuracy",
        "qa_consistency",
    ]
    assert at.selectbox(key="hist_k").value == 1
    want = sql(
        wh,
        """SELECT m.eval_run_id, m.system, m.value, m.ci_low, m.ci_high FROM eval_metrics m
                      JOIN eval_runs e USING (eval_run_id) WHERE e.benchmark_id = ? AND m.group_by = 'all'
                      AND m.metric = 'recall_flat' AND m.k = 1 ORDER BY e.started_at, m.system""",
        [benchmark_id(wh, "release")],
    )
    assert want["eval_run_id"].n_unique() == 2
    first_chart = charts(at)[0]
    series = next(df for df in first_chart.values() if "system" in df.columns)
    assert series.select(want.columns).to_dicts() == want.to_dicts()
    markers = next(df for df in first_chart.values() if "changes" in df.columns)
    assert markers["eval_run_id"].to_list() == [evaluated["personas"]["json"]["eval_run_id"]]
    change = "aggregation: mean over questions → mean of persona means"
    assert markers["changes"].to_list() == [f"bm25: {change}; random: {change}"]
    changed = frame(at, "eval_run_id", "system", "changes")
    assert changed.select("system", "changes").rows() == [("bm25", change), ("random", change)]
    # the axis is the evaluations in order, labelled by number and time (two runs seconds apart apart)
    assert (
        series["evaluation"].str.starts_with("1 · ").sum() == 2
        and series["evaluation"].n_unique() == 2
    )


@pytest.mark.prefect
def test_side_by_side_defaults_to_the_last_two_different_evaluations(
    reading, evaluated: dict, tmp_path: Path
) -> None:
    """A warehouse from before re-runs were recognised holds a copy of its newest evaluation: the comparison
    skips it and defaults to the newest evaluation that differs."""
    wh = reading(Path(shutil.copy(evaluated["wh"], tmp_path / "copies.duckdb")))
    newest, older = (
        evaluated["personas"]["json"]["eval_run_id"],
        evaluated["first"]["json"]["eval_run_id"],
    )
    con = duckdb.connect(str(wh))
    try:
        tables = [
            r[0]
            for r in con.execute(
                "SELECT DISTINCT table_name FROM information_schema.columns WHERE column_name = 'eval_run_id' "
                "AND table_schema = 'main' AND table_name IN (SELECT table_name FROM information_schema.tables "
                "WHERE table_type = 'BASE TABLE')"
            ).fetchall()
        ]
        for table in tables:
            con.execute(
                f"INSERT INTO {table} SELECT * REPLACE ('copy-of-newest' AS eval_run_id) FROM {table} "
                "WHERE eval_run_id = ?",
                [newest],
            )
        con.execute(
            "UPDATE eval_runs SET started_at = started_at + INTERVAL 1 MINUTE "
            "WHERE eval_run_id = 'copy-of-newest'"
        )
    finally:
        con.close()
    at = app("Leaderboard", benchmark="release")
    assert at.selectbox(key="lb_eval").value == "copy-of-newest"
    assert at.selectbox(key="lb_other").value == older
    assert "differ in provenance" in " ".join(w.value for w in at.warning)


# -- readable calls --------------------------------------------------------------------------------------


@pytest.mark.prefect
def test_offline_calls_keep_their_prompt_and_reply_labelled_with_their_question(
    evaluated: dict,
) -> None:
    wh, eid = evaluated["wh"], evaluated["first"]["json"]["eval_run_id"]
    calls = sql(
        wh,
        "SELECT stage, item::VARCHAR AS item, prompt_text, response_text FROM llm_calls WHERE run_id = ?",
        [eid],
    )
    assert calls.height == evaluated["first"]["new_calls"] > 0
    assert calls["prompt_text"].null_count() == 0 and calls["response_text"].null_count() == 0
    assert set(calls["stage"]) >= {"eval.answer_free", "eval.judge"}
    judge = calls.filter(pl.col("stage") == "eval.judge").row(0, named=True)
    label = json.loads(judge["item"])
    assert set(label) == {"question_id", "system", "k"} and label["system"] in ("bm25", "random")
    question = sql(
        wh, "SELECT question FROM questions WHERE question_id = ?", [label["question_id"]]
    )["question"][0]
    turns = json.loads(judge["prompt_text"])
    assert [t["role"] for t in turns] == ["system", "user"] and question in turns[1]["content"]
    assert set(json.loads(judge["response_text"])) >= {"qa_consistency", "mem_covered"}


class Verdict(BaseModel):
    verdict: str


def _live_model(server: FakeAPIServer, store_calls: str | None, sink: MemorySink):
    settings = {
        "models": {"judge": "openai/test-model"},
        "providers": {
            "openai": {
                "base_url": server.base_url,
                "api_key_env": "CLONEMEM_TEST_KEY",
                "max_retries": 0,
                "timeout_s": 10,
            }
        },
    }
    if store_calls is not None:
        settings["logging"] = {"store_calls": store_calls}
    return get_model(RunConfig.model_validate(settings), "judge", sink=sink)


def test_a_live_call_keeps_no_text_unless_the_config_says_all(monkeypatch) -> None:
    from clonemem.llm.types import about

    monkeypatch.setenv("CLONEMEM_TEST_KEY", SECRET)
    prompt = prompts.Prompt("t", "You judge answers.", "Is the answer right?", "h")
    with FakeAPIServer("openai") as server:
        for store_calls in (None, "all"):
            server.push(server.flavor.ok('{"verdict": "right"}', "test-model"))
            sink = MemorySink()
            model = _live_model(server, store_calls, sink)
            with about(question_id="q1", system="bm25", k=3):
                assert (
                    model.structured(
                        model.request("eval.judge", prompt, schema=Verdict), Verdict
                    ).verdict
                    == "right"
                )
            (rec,) = sink.records
            assert json.loads(rec.item) == {"question_id": "q1", "system": "bm25", "k": 3}
            if store_calls is None:  # the default: live exchanges are not kept
                assert rec.prompt_text is None and rec.response_text is None
            else:
                assert json.loads(rec.prompt_text)[0] == {
                    "role": "system",
                    "content": "You judge answers.",
                }
                assert rec.response_text == '{"verdict": "right"}'
            assert SECRET not in json.dumps(rec.row(), default=str)
        assert SECRET in server.seen[-1].headers.get(
            "authorization", ""
        )  # the key went to the server only


@pytest.mark.prefect
def test_inspector_shows_the_judges_exchange_for_a_question(reading, evaluated: dict) -> None:
    wh = reading(evaluated["wh"])
    first, latest = (
        evaluated["first"]["json"]["eval_run_id"],
        evaluated["personas"]["json"]["eval_run_id"],
    )
    judge = sql(
        wh,
        """SELECT json_extract_string(item, '$.question_id') AS qid, prompt_text, response_text
                       FROM llm_calls WHERE run_id = ? AND stage = 'eval.judge'
                       AND json_extract_string(item, '$.system') = 'bm25' AND json_extract_string(item, '$.k') = '3'
                       ORDER BY qid LIMIT 1""",
        [first],
    ).row(0, named=True)
    at = app("Question inspector", benchmark="release", question=judge["qid"])
    assert (
        at.selectbox(key="qi_eval").value == latest
    )  # its answers came from the first run's cache
    at.selectbox(key=f"qi_k_{latest}").set_value(3).run()
    assert_clean(at, "Question inspector")
    labels = [e.label for e in at.expander]
    assert any(
        lb.startswith("bm25 · eval.judge (offline/judge) · ok · made by run " + first[:8])
        for lb in labels
    ), labels
    shown = [t.value for t in at.text]
    assert judge["response_text"] in shown
    assert json.loads(judge["prompt_text"])[1]["content"] in shown
    assert "earlier run that made them" in texts(at)


@pytest.mark.prefect
def test_calls_page_filters_by_run_stage_and_outcome(reading, evaluated: dict) -> None:
    wh = reading(evaluated["wh"])
    first = evaluated["first"]["json"]["eval_run_id"]
    at = app("Calls", benchmark="release")
    assert at.multiselect(key="calls_runs").value == [
        first
    ]  # the only run of 'release' that made calls
    assert f"{evaluated['first']['new_calls']} call(s) match" in texts(at)
    at.multiselect(key="calls_stages").set_value(["eval.judge"]).run()
    at.multiselect(key="calls_outcomes").set_value(["ok"]).run()
    assert_clean(at, "Calls")
    listed = frame(at, "call_id", "stage", "outcome", "question_id")
    want = sql(
        wh,
        "SELECT call_id FROM llm_calls WHERE run_id = ? AND stage = 'eval.judge' AND outcome = 'ok' "
        "ORDER BY started_at DESC, call_id",
        [first],
    )
    assert listed["call_id"].to_list() == want["call_id"].to_list()[:500]
    assert set(listed["stage"]) == {"eval.judge"} and set(listed["outcome"]) == {"ok"}
    assert f"{want.height} call(s) match" in texts(at)
    chosen = at.selectbox(key="calls_call").value
    reply = sql(wh, "SELECT response_text FROM llm_calls WHERE call_id = ?", [chosen])[
        "response_text"
    ][0]
    assert reply in [t.value for t in at.text]
    at.multiselect(key="calls_outcomes").set_value(["permanent_error"]).run()
    assert "0 call(s) match" in texts(at)
