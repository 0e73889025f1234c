"""Prefect foundation: the import flow runs on the ephemeral server and its parse task is cached across runs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytestmark = pytest.mark.prefect


def test_import_flow_caches_parsing_across_runs(tmp_path: Path, demo_file: Path) -> None:
    from prefect.states import State

    from clonemem.flows.imports import import_flow
    from clonemem.warehouse import Warehouse

    wh_path = str(tmp_path / "wh.duckdb")
    # a copy of its own: the CLI's imports (earlier tests) run this flow's tasks too, and share the cache
    demo_file = Path(shutil.copy(demo_file, tmp_path / demo_file.name))
    first: State = import_flow("release", [str(demo_file)], "bench", wh_path, return_state=True)
    # the same name again replaces the benchmark; the unchanged file's parse is served from the cache
    second: State = import_flow(
        "release", [str(demo_file)], "bench", wh_path, "replace", return_state=True
    )
    assert first.is_completed() and second.is_completed()
    assert second.result().questions == 6

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    with get_client(sync_client=True) as client:

        def parse_states(state: State) -> list[str]:
            runs = client.read_task_runs(
                flow_run_filter=FlowRunFilter(
                    id=FlowRunFilterId(any_=[state.state_details.flow_run_id])
                )
            )
            return sorted(r.state.name for r in runs if r.name.startswith("parse"))

        assert parse_states(first) == ["Completed"]
        assert parse_states(second) == ["Cached"]
    with Warehouse.open_reader(wh_path) as wh:
        assert wh.scalar("SELECT count(*) FROM traces") == 16


def test_import_flow_rejects_a_broken_file(tmp_path: Path) -> None:
    from clonemem.flows.imports import import_flow
    from clonemem.importers.base import ImportFailed as ReleaseError

    bad = tmp_path / "bad.json"
    bad.write_text('{"person_name": "x"}', "utf-8")
    with pytest.raises(ReleaseError, match=r"bad.json: \$.person_id: required field is missing"):
        import_flow("release", [str(bad)], "bench", str(tmp_path / "wh.duckdb"))
    assert not (tmp_path / "wh.duckdb").exists()


@pytest.mark.slow
def test_a_pipeline_run_leaves_artifacts_summary_lines_and_its_ids(tmp_path: Path) -> None:
    """What a run leaves in Prefect: the gate's table, the QC funnel, the leaderboard with intervals, the
    pipeline's links; one summary line per stage (not one per task); warehouse rows with its flow-run id."""
    import logging
    import tomllib

    from prefect.states import State

    from clonemem.flows.pipeline import pipeline_flow
    from clonemem.schemas.config import RunConfig
    from clonemem.warehouse import Warehouse
    from tests.pipeline_kit import TINY, flow_run_lines_at_info, flow_run_records

    cfg = RunConfig.model_validate(
        {**tomllib.loads(TINY.replace("{personas}", "1")), "name": "seen"}
    )
    wh = str(tmp_path / "wh.duckdb")
    with (
        flow_run_lines_at_info()
    ):  # a deployment's worker logs at INFO; the test process at WARNING
        state: State = pipeline_flow(wh, cfg, systems=["bm25", "random"], ks=[3], return_state=True)
    assert state.is_completed()
    result = state.result()
    flow_run_id = str(state.state_details.flow_run_id)
    run_ids, artifacts, logs = flow_run_records(
        state.state_details.flow_run_id, "pipeline 'seen' done"
    )
    keys = {a.key for a in artifacts}
    assert {"gate-seen", "qc-funnel-seen", "leaderboard-seen", "pipeline-seen"} <= keys, keys
    board = next(a for a in artifacts if a.key == "leaderboard-seen")
    assert "| bm25 | 3 |" in board.data and "[" in board.data  # rows with 95% intervals
    funnel = next(a for a in artifacts if a.key == "qc-funnel-seen")
    assert "rejected_sufficiency" in str(funnel.data)
    messages = [log.message for log in logs]
    assert any(m.startswith("generation: 1/1 personas") for m in messages), messages
    assert any(m.startswith("stage IV:") for m in messages) and any(
        m.startswith("gate passed") for m in messages
    )
    # one line per flow, none per task run (a tiny pipeline runs hundreds of tasks)
    assert not [
        log.message for log in logs if log.task_run_id is not None and log.level < logging.WARNING
    ]
    assert len(messages) < 60, len(messages)
    with Warehouse.open_reader(wh) as r:
        kinds = dict(r.rows("SELECT kind, count(*) FROM runs GROUP BY kind"))
        ids = {x for (x,) in r.rows("SELECT flow_run_id FROM runs")}
        eval_run = r.scalar("SELECT run_id FROM eval_runs")
    assert {"generate", "qa", "pipeline"} <= set(kinds) and flow_run_id in ids
    assert eval_run in {str(x) for x in run_ids} and result.evaluation.eval_run_id == eval_run
