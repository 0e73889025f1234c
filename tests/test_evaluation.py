"""Evaluation on an imported release file: every system runs, time-awareness holds, the JSON contract."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from clonemem.cli import app
from clonemem.importers import import_files
from clonemem.memory import SYSTEMS
from clonemem.schemas.config import RunConfig
from clonemem.warehouse import Warehouse

pytestmark = pytest.mark.prefect

CONTRACT_METRICS = (
    "recall_flat",
    "recall_all_all",
    "recall_all_any",
    "recall_any_all",
    "recall_any_any",
    "choice_accuracy",
    "qa_consistency",
    "qa_hallucination_rate",
    "qa_perfect_rate",
    "mem_recall",
    "mem_helpful",
    "context_tokens",
    "build_seconds",
    "retrieval_p50_ms",
    "retrieval_p95_ms",
    "llm_calls",
    "llm_tokens",
)


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> Path:
    """The release fixture, not gated: the evaluations below are forced (the gate would cost seconds of
    Great Expectations; refusing an ungated benchmark is tested through the CLI below)."""
    from clonemem.demo import fixture_files

    path = tmp_path_factory.mktemp("eval") / "wh.duckdb"
    with Warehouse.open_writer(path) as wh:
        import_files(wh, "release", fixture_files(), "imported")
    return path


@pytest.fixture(scope="module")
def result(imported: Path) -> dict:
    """Every system at k 1, 3, 5 with the default config (the full context's budget is 8,000 tokens)."""
    from clonemem.flows.evaluation import evaluate_flow

    return evaluate_flow(
        str(imported), "imported", SYSTEMS.names(), [1, 3, 5], force=True, config=RunConfig()
    ).model_dump(mode="json")


def test_every_system_runs_and_the_contract_holds(result: dict) -> None:
    assert {r["system"] for r in result["results"]} == set(SYSTEMS.names())
    assert len(result["results"]) == len(SYSTEMS.names()) * 3
    for r in result["results"]:
        assert r["n_questions"] == 6
        for metric in CONTRACT_METRICS:
            assert metric in r
        assert r["recall_flat"] is not None and 0.0 <= r["recall_flat"] <= 1.0
    assert result["by_question_type"] and all(
        {"system", "k", "question_type", "n_questions"} <= set(e)
        for e in result["by_question_type"]
    )
    oracle = next(r for r in result["results"] if r["system"] == "oracle" and r["k"] == 5)
    assert oracle["recall_any_any"] == 1.0


def test_free_text_only_items_have_no_choice_accuracy(imported: Path, result: dict) -> None:
    with Warehouse.open_reader(imported) as wh:
        rows = wh.rows(
            "SELECT q.external_id, m.value FROM eval_question_metrics m JOIN questions q USING (question_id) "
            "WHERE m.metric = 'choice_accuracy' AND m.system = 'oracle' AND m.k = 5 ORDER BY 1"
        )
        judged = wh.rows("SELECT count(*) FROM eval_judgments WHERE scored")[0][0]
    values = dict(rows)
    assert values["q03"] is None and values["q06"] is None  # free-text only: choice_accuracy null
    assert values["q01"] is not None
    assert judged > 0
    oracle = next(r for r in result["results"] if r["system"] == "oracle" and r["k"] == 5)
    assert oracle["mem_recall"] is not None and oracle["qa_consistency"] is not None


def test_retrieval_is_time_aware(imported: Path, result: dict) -> None:
    with Warehouse.open_reader(imported) as wh:
        late = wh.rows(
            "SELECT r.system, q.external_id FROM eval_retrievals r JOIN questions q USING (question_id), "
            "unnest(from_json(r.retrieved_trace_ids, '[\"VARCHAR\"]')) AS u(tid) JOIN traces t ON t.trace_id = u.tid "
            "WHERE r.system NOT IN ('oracle', 'oracle_statements') AND t.event_date > q.question_time"
        )
    assert late == []


def test_cli_refuses_an_ungated_benchmark_and_writes_json(tmp_path: Path, demo_file: Path) -> None:
    runner = CliRunner()
    wh = str(tmp_path / "wh.duckdb")
    assert (
        runner.invoke(
            app, ["--warehouse", wh, "import", "release", str(demo_file), "--name", "x"]
        ).exit_code
        == 0
    )
    got = runner.invoke(app, ["--warehouse", wh, "evaluate", "x", "--systems", "bm25"])
    assert got.exit_code == 1 and "gate status 'pending'" in got.output
    got = runner.invoke(app, ["--warehouse", wh, "evaluate", "x", "--systems", "nope"])
    assert got.exit_code == 1 and "unknown memory system 'nope'" in got.output
    out = tmp_path / "r.json"
    got = runner.invoke(
        app,
        [
            "--warehouse",
            wh,
            "evaluate",
            "x",
            "--systems",
            "bm25,oracle",
            "--k",
            "2,4",
            "--json",
            str(out),
            "--force",
        ],
    )
    assert got.exit_code == 0, got.output
    data = json.loads(out.read_text("utf-8"))
    assert [(r["system"], r["k"]) for r in data["results"]] == [
        ("bm25", 2),
        ("bm25", 4),
        ("oracle", 2),
        ("oracle", 4),
    ]
    got = runner.invoke(app, ["systems", "--json"])
    assert set(json.loads(got.output)) == set(SYSTEMS.names())


def test_the_full_context_budget_follows_the_runs_config(imported: Path, result: dict) -> None:
    from clonemem.flows.evaluation import evaluate_flow

    cfg = RunConfig.model_validate({"evaluation": {"full_context_tokens": 120}})
    got = evaluate_flow(str(imported), "imported", ["full_context"], [5], force=True, config=cfg)
    small = got.scores("full_context", 5).context_tokens
    # the default config's run, at 8,000 tokens
    assert RunConfig().evaluation.full_context_tokens == 8000
    large = next(
        r["context_tokens"]
        for r in result["results"]
        if (r["system"], r["k"]) == ("full_context", 5)
    )
    assert 0 < small <= 120 * 1.5 < large  # words are counted against the budget, tokens reported


def test_failure_diagnosis_follows_each_systems_design(imported: Path, result: dict) -> None:
    """Write / read / use: exclusive shares that sum to one; raw-text retrievers never fail at
    writing, the oracle never at writing or reading, a memory that rewrites traces into facts loses writes."""
    rows = {(r["system"], r["k"]): r for r in result["results"]}
    for (system, k), r in rows.items():
        d = r["diagnosis"]
        if d["n"]:
            assert (
                abs(
                    sum(
                        d[m]
                        for m in ("write_failure", "read_failure", "utilization_failure", "correct")
                    )
                    - 1
                )
                < 1e-9
            )
    for system in ("bm25", "dense", "hybrid", "random", "full_context", "oracle"):
        assert rows[(system, 5)]["diagnosis"]["write_failure"] == 0.0, system
        assert rows[(system, 5)]["write_coverage"] == 1.0, system
    assert rows[("oracle", 5)]["diagnosis"]["read_failure"] == 0.0
    assert (
        rows[("random", 1)]["diagnosis"]["read_failure"]
        >= rows[("random", 5)]["diagnosis"]["read_failure"]
    )
    assert (
        rows[("mem0", 5)]["diagnosis"]["write_failure"] > 0
        and rows[("mem0", 5)]["write_coverage"] < 1
    )
    assert (
        rows[("flat_wo_org", 5)]["diagnosis"]["write_failure"]
        > rows[("flat_combined", 5)]["diagnosis"]["write_failure"]
    )
    assert (
        rows[("tfidf", 5)]["diagnosis"]["n"] == 0
    )  # a plugin that cannot list its memory: undecided, not 0
    with Warehouse.open_reader(imported) as wh:
        stored = wh.rows(
            "SELECT system, value FROM eval_metrics WHERE metric = 'write_failure' AND group_by = 'all' "
            "AND k = 5 ORDER BY system"
        )
        coverage = dict(wh.rows("SELECT system, write_coverage FROM eval_system_stats"))
    assert dict(stored)["mem0"] == rows[("mem0", 5)]["diagnosis"]["write_failure"]
    assert coverage["mem0"] == rows[("mem0", 5)]["write_coverage"] and coverage["tfidf"] is None


def test_evaluation_tasks_run_on_the_configured_workers(
    imported: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`evaluation.workers` sizes the threads the evaluation's tasks run on (the flow's own runner is fixed
    when it is decorated, so it was always 8)."""
    from prefect.task_runners import ThreadPoolTaskRunner

    from clonemem.flows import evaluation

    runners: list = []

    class Counting(ThreadPoolTaskRunner):
        def __init__(self, max_workers: int | None = None) -> None:
            super().__init__(max_workers=max_workers)
            self.submitted = 0
            runners.append(self)

        def submit(
            self, task: Any, parameters: dict, wait_for: Any = None, dependencies: Any = None
        ) -> Any:
            self.submitted += 1
            return super().submit(task, parameters, wait_for, dependencies)

    monkeypatch.setattr(evaluation, "ThreadPoolTaskRunner", Counting)
    cfg = RunConfig.model_validate({"evaluation": {"workers": 3}})
    evaluation.evaluate_flow(
        str(imported), "imported", ["bm25", "random"], [1, 3], force=True, config=cfg
    )
    [runner] = runners
    # every build-and-retrieve (2 systems × 1 persona) and every answer batch (2 systems × 2 k × 1 persona)
    assert (runner._max_workers, runner.submitted) == (3, 2 + 4)
