"""Code that relies on a library's internals refuses any version of the library but the one it was
written for, in one line (clonemem/thirdparty.py); the ephemeral server's start under the watchdog
builds Prefect's own command and swaps nothing global (a Popen in another thread is Python's own)."""

from __future__ import annotations

import subprocess
import threading
from typing import Any

import pytest

from clonemem import prefect_env, thirdparty
from clonemem.expectations import gx_duckdb
from clonemem.tasks import caching

OTHER = "0.0.1"


@pytest.fixture
def other_versions(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every library reported at another version than the project pins, and nothing checked yet."""
    monkeypatch.setattr(thirdparty, "installed", lambda package: OTHER)
    monkeypatch.setattr(thirdparty, "_checked", set())


def test_a_library_at_its_version_passes_and_another_is_refused_in_one_line(monkeypatch) -> None:
    monkeypatch.setattr(thirdparty, "_checked", set())
    thirdparty.written_for("prefect", prefect_env.PREFECT_VERSION, "x")  # the installed pin
    with pytest.raises(thirdparty.UnsupportedLibraryVersion) as refused:
        thirdparty.written_for("prefect", "9.9.9", "the step cache")
    assert str(refused.value) == (
        f"the step cache relies on the internals of prefect 9.9.9, but prefect "
        f"{prefect_env.PREFECT_VERSION} is installed: install prefect==9.9.9 "
        "(constraints.txt)"
    )
    with pytest.raises(
        thirdparty.UnsupportedLibraryVersion, match=r"but no-such-package \(none\) is installed"
    ):
        thirdparty.written_for("no-such-package", "1.0", "x")


def test_the_pins_are_the_installed_versions() -> None:
    assert thirdparty.installed("prefect") == prefect_env.PREFECT_VERSION
    assert thirdparty.installed("great-expectations") == gx_duckdb.GX_VERSION


def test_the_server_patch_refuses_another_prefect(
    other_versions, monkeypatch: pytest.MonkeyPatch
) -> None:
    from prefect.server.api.server import SubprocessASGIServer

    monkeypatch.setattr(prefect_env, "_patched", False)
    monkeypatch.setattr(prefect_env, "_early", None)
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    before = SubprocessASGIServer._run_uvicorn_command
    with pytest.raises(
        thirdparty.UnsupportedLibraryVersion, match=rf"prefect {OTHER} is installed"
    ):
        prefect_env.die_with_parent_server()
    assert SubprocessASGIServer._run_uvicorn_command is before  # nothing patched


def test_the_gx_patch_refuses_another_gx(other_versions, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gx_duckdb, "_patched", False)
    with pytest.raises(
        thirdparty.UnsupportedLibraryVersion, match=rf"great-expectations {OTHER} is installed"
    ):
        gx_duckdb.patch_duckdb_connection()
    with pytest.raises(thirdparty.UnsupportedLibraryVersion, match=r"great-expectations==1\.24\.1"):
        gx_duckdb.close_all_engines()


def test_the_data_docs_views_refuse_another_gx(other_versions) -> None:
    from clonemem.expectations.docs_views import IndexPageView, PageView

    for view in (PageView, IndexPageView):
        with pytest.raises(
            thirdparty.UnsupportedLibraryVersion, match=rf"great-expectations {OTHER} is installed"
        ):
            view()


def test_the_step_cache_refuses_another_prefect(other_versions) -> None:
    with pytest.raises(
        thirdparty.UnsupportedLibraryVersion, match=r"^the step cache \(clonemem.tasks.caching\)"
    ):
        caching.step_store()


class _Server:
    port = 4242


def test_the_watched_server_gets_prefects_own_command(monkeypatch: pytest.MonkeyPatch) -> None:
    """The replacement builds exactly what the installed Prefect's method would run."""
    from prefect.server.api.server import SubprocessASGIServer
    from prefect.settings import get_current_settings

    original = prefect_env._prefects_run_uvicorn or SubprocessASGIServer._run_uvicorn_command
    seen: dict[str, Any] = {}
    monkeypatch.setattr(subprocess, "Popen", lambda args, env: seen.update(args=args, env=env))
    original(_Server())
    args, env = prefect_env.server_command(4242, get_current_settings())
    assert seen["args"][1:3] == ["-m", "uvicorn"] and seen["args"][3:] == args
    assert seen["env"] == env


def test_starting_the_watched_server_swaps_no_global(monkeypatch: pytest.MonkeyPatch) -> None:
    """While the server starts, another thread's subprocess.Popen is Python's own (it used to be swapped
    for the whole process during the start)."""
    from prefect.server.api.server import SubprocessASGIServer

    monkeypatch.setattr(prefect_env, "_patched", False)
    monkeypatch.setattr(prefect_env, "_early", None)
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.setattr(
        SubprocessASGIServer, "_run_uvicorn_command", SubprocessASGIServer._run_uvicorn_command
    )
    monkeypatch.setattr(prefect_env, "_prefects_run_uvicorn", prefect_env._prefects_run_uvicorn)
    real = subprocess.Popen
    starting, checked = threading.Event(), threading.Event()
    seen_elsewhere: list[object] = []

    def popen_under_watchdog(args: list[str], **kwargs: Any) -> str:
        starting.set()
        checked.wait(5)
        return "started"

    def other_thread() -> None:
        starting.wait(5)
        seen_elsewhere.append(subprocess.Popen)
        checked.set()

    monkeypatch.setattr(prefect_env, "_popen_under_watchdog", popen_under_watchdog)
    prefect_env.die_with_parent_server()
    thread = threading.Thread(target=other_thread)
    thread.start()
    assert SubprocessASGIServer._run_uvicorn_command(_Server()) == "started"
    thread.join(5)
    assert seen_elsewhere == [real]
