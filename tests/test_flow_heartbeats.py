"""Flow runs on a temporary Prefect server send no heartbeats: nothing outlives the command to watch them,
and each flow run waited up to a second for its heartbeat thread at its end."""

from __future__ import annotations

from pathlib import Path

import pytest
from prefect import flow
from prefect.settings import (
    PREFECT_API_URL,
    PREFECT_FLOWS_HEARTBEAT_FREQUENCY,
    get_current_settings,
    temporary_settings,
)

from clonemem.cli.app import writing
from clonemem.prefect_env import on_temporary_server

DEFAULT = 180  # Prefect's own
# each test starts from Prefect's default (this process's temporary server may have turned it off)
PREFECTS_DEFAULT = {"restore_defaults": {PREFECT_FLOWS_HEARTBEAT_FREQUENCY}}


@flow(persist_result=False)
def heartbeat_seen() -> int | None:
    return get_current_settings().flows.heartbeat_frequency


@pytest.mark.prefect
def test_a_commands_flows_on_the_temporary_server_send_no_heartbeat(tmp_path: Path) -> None:
    with temporary_settings(**PREFECTS_DEFAULT):
        assert heartbeat_seen() == DEFAULT
        with writing(tmp_path / "wh.duckdb"):  # what every command that writes runs its flows in
            assert heartbeat_seen() is None
        assert heartbeat_seen() == DEFAULT


def test_a_heartbeat_the_user_set_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PREFECT_FLOWS_HEARTBEAT_FREQUENCY", "60")
    with temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: 60}), on_temporary_server():
        assert get_current_settings().flows.heartbeat_frequency == 60


def test_flows_on_the_users_own_server_keep_their_heartbeats() -> None:
    user = {PREFECT_API_URL: "http://127.0.0.1:4200/api"}
    with temporary_settings(updates=user, **PREFECTS_DEFAULT), on_temporary_server():
        assert get_current_settings().flows.heartbeat_frequency == DEFAULT
