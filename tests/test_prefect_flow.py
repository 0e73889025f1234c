"""Prefect foundation: the import flow runs on the ephemeral server and its parse task is cached across runs."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.prefect


def test_import_flow_caches_parsing_across_runs(tmp_path: Path, demo_file: Path) -> None:
    from prefect.states import State

    from clonemem.flows.release import import_release_flow
    from clonemem.warehouse import Warehouse

    wh_path = str(tmp_path / "wh.duckdb")
    first: State = import_release_flow([str(demo_file)], "bench", wh_path, return_state=True)
    # the same name again replaces the benchmark; the unchanged file's parse is served from the cache
    second: State = import_release_flow([str(demo_file)], "bench", wh_path, "replace", return_state=True)
    assert first.is_completed() and second.is_completed()
    assert second.result().questions == 6

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    with get_client(sync_client=True) as client:
        def parse_states(state: State) -> list[str]:
            runs = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[state.state_details.flow_run_id])))
            return sorted(r.state.name for r in runs if r.name.startswith("parse"))

        assert parse_states(first) == ["Completed"]
        assert parse_states(second) == ["Cached"]
    with Warehouse.open_reader(wh_path) as wh:
        assert wh.scalar("SELECT count(*) FROM traces") == 16


def test_import_flow_rejects_a_broken_file(tmp_path: Path) -> None:
    from clonemem.flows.release import import_release_flow
    from clonemem.release import ReleaseError

    bad = tmp_path / "bad.json"
    bad.write_text('{"person_name": "x"}', "utf-8")
    with pytest.raises(ReleaseError, match=r"bad.json: \$.person_id: required field is missing"):
        import_release_flow([str(bad)], "bench", str(tmp_path / "wh.duckdb"))
    assert not (tmp_path / "wh.duckdb").exists()
