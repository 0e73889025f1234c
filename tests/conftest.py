"""Test isolation: no live LLM can be reached, Prefect state lives in a temporary home."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

# Before anything imports prefect: Prefect reads its settings at import time.
_PREFECT_HOME = tempfile.mkdtemp(prefix="clonemem-test-prefect-")
atexit.register(shutil.rmtree, _PREFECT_HOME, True)
os.environ["PREFECT_HOME"] = _PREFECT_HOME
os.environ.pop("PREFECT_API_URL", None)
os.environ["CLONEMEM_DISABLE_LIVE_LLM"] = os.environ.get("CLONEMEM_LIVE_TESTS") and "0" or "1"
os.environ.pop("CLONEMEM_WAREHOUSE", None)
# Embeddings cached on disk for this run only, never the user's own cache: one file for the whole run,
# as the machine's processes share one. The process that starts the run makes it (in its temporary home,
# removed at its exit); its xdist processes inherit its environment and keep that file, and so do the CLI
# subprocesses they start.
_EMBED_CACHE = (
    os.environ.get("PYTEST_XDIST_WORKER") and os.environ.get("CLONEMEM_TEST_EMBED_CACHE")
) or (os.path.join(_PREFECT_HOME, "embeddings.sqlite3"))
os.environ["CLONEMEM_TEST_EMBED_CACHE"] = os.environ["CLONEMEM_EMBED_CACHE"] = _EMBED_CACHE

from clonemem.prefect_env import configure  # noqa: E402

configure()

import pytest  # noqa: E402

from clonemem.demo import fixture_files  # noqa: E402
from clonemem.warehouse import Warehouse  # noqa: E402


@pytest.fixture(scope="session")
def prefect_server() -> Iterator[str]:
    """This process's temporary Prefect server, for the flows of every test marked ``prefect``: started
    once. Without it, a flow run after an in-process CLI command started a second server (a command
    points Prefect at its early server only while it runs)."""
    from clonemem.prefect_env import on_early_server, start_server_early, temporary_server_url

    start_server_early()
    with on_early_server():
        yield temporary_server_url() or ""


@pytest.fixture(scope="session", autouse=True)
def _flows_run_as_a_command_runs_them(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every flow of a test process runs on a temporary server, as a command's flows do: with the same
    settings (no heartbeats: ``prefect_env.on_temporary_server``). When the process started the shared
    server (``pytest_collection_finish``), on that one from the first test: the flows of session and
    module fixtures run before any test's own fixtures, and Prefect would start a second server of its
    own for them (10 s of CPU, and a second server serving every run)."""
    from clonemem.prefect_env import on_temporary_server

    if _SHARED_SERVER_STARTED:
        request.getfixturevalue("prefect_server")
    with on_temporary_server():
        yield


@pytest.fixture(autouse=True)
def _prefect_tests_share_one_server(request: pytest.FixtureRequest) -> None:
    if request.node.get_closest_marker("prefect") is not None:
        request.getfixturevalue("prefect_server")


@pytest.fixture
def demo_file() -> Path:
    return fixture_files()[0]


@pytest.fixture
def demo_doc(demo_file: Path) -> dict:
    return json.loads(demo_file.read_text("utf-8"))


@pytest.fixture
def wh_path(tmp_path: Path) -> Path:
    return tmp_path / "wh.duckdb"


@pytest.fixture(scope="session")
def empty_warehouse_once(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new warehouse (every migration applied: ~0.2 s), made once per test process; ``wh`` opens a
    copy of it."""
    path = tmp_path_factory.mktemp("empty") / "wh.duckdb"
    with Warehouse.open_writer(path):
        pass
    return path


@pytest.fixture
def wh(wh_path: Path, empty_warehouse_once: Path) -> Iterator[Warehouse]:
    """A new warehouse open for writing (a copy of ``empty_warehouse_once``, not migrated anew)."""
    from tests.shared_kit import copy_warehouse

    with Warehouse.open_writer(copy_warehouse(empty_warehouse_once, wh_path)) as w:
        yield w


@pytest.fixture(scope="session")
def tiny_gated_once(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Built once per test process: copy it (``shared_kit.copy_warehouse``) before writing to it."""
    from tests.shared_kit import build_tiny_gated

    return build_tiny_gated(tmp_path_factory.mktemp("shared-tiny-gated"))


@pytest.fixture(scope="session")
def full_once(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``dashboard_kit.full_warehouse``, built once per test process: copy it before writing to it."""
    from tests.dashboard_kit import full_warehouse

    return full_warehouse(tmp_path_factory.mktemp("shared-full"))


def write_json(path: Path, doc: object) -> Path:
    path.write_text(json.dumps(doc, ensure_ascii=False), "utf-8")
    return path


# -- leave without interpreter teardown (as the CLI does; see clonemem.cli.leave) -------------------

_EXIT_STATUS = 0


_SHARED_SERVER_STARTED = False


def _xdist_role(config: pytest.Config) -> str:
    """``worker`` (runs tests), ``controller`` (xdist's parent: hands tests out, runs none, reports) or
    ``single`` (a run without ``-n``)."""
    if hasattr(config, "workerinput"):
        return "worker"
    return "controller" if config.pluginmanager.has_plugin("dsession") else "single"


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the shared Prefect server (``prefect_server``) as soon as the tests that need it are known:
    it takes 10-20 s to start, which then overlaps the tests run before the first of them instead of
    holding that one up. Not in xdist's controlling process, which runs no test."""
    if _xdist_role(session.config) == "controller":
        return
    if any(item.get_closest_marker("prefect") is not None for item in session.items):
        from clonemem.prefect_env import start_server_early

        global _SHARED_SERVER_STARTED
        start_server_early()
        _SHARED_SERVER_STARTED = True


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    global _EXIT_STATUS
    _EXIT_STATUS = int(exitstatus)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """After the report: duckdb's nanobind would print "leaked instances" dumps at teardown for module
    constants that Prefect's background threads keep referenced; every warehouse is closed by now."""
    import sys

    if _xdist_role(config) == "worker":
        return  # its controller reports
    from clonemem.cli import leave

    config.get_terminal_writer().flush()
    sys.stdout.flush()
    leave(
        _EXIT_STATUS
    )  # threads' exit hooks, then atexit (the temporary PREFECT_HOME above is removed)


# -- how the files share out over test processes ----------------------------------------------------
#
# `make test` runs `pytest -n 2 --dist loadfile --no-loadscope-reorder`: xdist gives each group of tests to
# one process, in the order collected. A group is a file (its module fixtures are built once), or the
# files that start from the same session-built warehouse (built once for all of them, not once in each
# process that happens to run one of them). The longest groups go first, so the two processes end
# together instead of one running a long file alone at the end (figures: `--durations=0`).

SHARED = {
    "test_dashboard.py": "full_once",
    "test_dashboard_figures.py": "full_once",
    "test_privacy.py": "tiny_gated_once",
    "test_privacy_scoring.py": "tiny_gated_once",
    "test_provider_rejection.py": "tiny_gated_once",
}
LONGEST_FIRST = (
    "full_once",
    "tiny_gated_once",
    "test_qa_gate.py",
    "test_release.py",
    "test_remote_evaluation.py",
    "test_gym.py",
    "test_results_file.py",
    "test_cli.py",
    "test_leaderboard.py",
    "test_evaluation.py",
    "test_memory_systems.py",
)


def _group(path: str) -> str:
    """A test's group, from its node id's file path."""
    name = path.split("::", 1)[0].rsplit("/", 1)[-1]
    return SHARED.get(name, name)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    # a stable sort: the rest stay in the order collected
    items.sort(key=lambda item: rank.get(_group(item.nodeid), len(rank)))


@pytest.hookimpl(optionalhook=True)  # xdist's hook: unknown to a run with `-p no:xdist`
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """``--dist loadfile`` by the groups above (xdist's own ``loadgroup`` marks no test with pytest 9:
    it renames node ids through an attribute pytest 9 no longer reads)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _group(nodeid)

    return GroupScheduling(config, log)  # type: ignore[arg-type]  # xdist's Producer, passed through
