"""Exit codes mean the same in every command, as the README lists them, proved through the CLI: 5 only
when a named memory system failed, 6 at the cost budget (evaluate too), 1 with the URL when the Prefect
API cannot be reached; and `evaluate --k` defaults to the config's `evaluation.k`."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from clonemem.demo import fixture_files
from clonemem.importers import import_files
from clonemem.warehouse import Warehouse
from tests.pipeline_kit import clonemem

pytestmark = [pytest.mark.prefect, pytest.mark.timeout(600)]

# A plugin system named by import path whose build raises, and one with a broken retrieve.
PLUGIN = """
from clonemem.memory.base import MemorySystem


class Broken(MemorySystem):
    name = "broken"

    def build(self, traces, ctx):
        raise ValueError("index file is corrupt")

    def retrieve(self, question, k):
        return []


class BadRetrieve(MemorySystem):
    name = "bad_retrieve"

    def build(self, traces, ctx):
        self.n = len(traces)

    def retrieve(self, question, k):
        return [None]  # not a Retrieved
"""


@pytest.fixture
def imported(tmp_path: Path) -> Path:
    path = tmp_path / "wh.duckdb"
    with Warehouse.open_writer(path) as wh:
        import_files(wh, "release", fixture_files(), "release")
    return path


def errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


def eval_runs(path: Path) -> int:
    with Warehouse.open_reader(path) as wh:
        return wh.rows("SELECT count(*) FROM eval_runs")[0][0]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed when the socket is: nothing listens there


@pytest.mark.slow  # console-script runs, each starting its own Prefect server
def test_a_failing_plugin_system_is_exit_5_naming_it_and_nothing_is_stored(
    imported: Path, tmp_path: Path
) -> None:
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "brokenmem.py").write_text(PLUGIN, "utf-8")
    got = clonemem(
        imported,
        tmp_path / "home",
        "evaluate",
        "release",
        "--systems",
        "bm25,brokenmem:Broken",
        "--k",
        "2",
        "--force",
        PYTHONPATH=str(plugins),
    )
    assert got.returncode == 5, got.stderr
    [line] = errors(got.stderr)
    assert "memory system 'brokenmem:Broken'" in line and "build for persona" in line, line
    assert "ValueError: index file is corrupt" in line and "Traceback" not in got.stderr
    assert eval_runs(imported) == 0

    got = clonemem(
        imported,
        tmp_path / "home",
        "evaluate",
        "release",
        "--systems",
        "brokenmem:BadRetrieve",
        "--k",
        "2",
        "--force",
        PYTHONPATH=str(plugins),
    )
    assert got.returncode == 5, got.stderr
    [line] = errors(got.stderr)
    assert "memory system 'brokenmem:BadRetrieve'" in line and "retrieve for question" in line, line


@pytest.mark.slow  # console-script runs, each starting its own Prefect server
def test_a_budget_stop_in_evaluate_is_exit_6_and_k_defaults_to_the_config(
    imported: Path, tmp_path: Path
) -> None:
    priced = tmp_path / "priced.toml"
    prices = "".join(
        f'[pricing."offline/{m}"]\ninput_per_mtok = 100.0\noutput_per_mtok = 400.0\n'
        for m in ("answerer", "judge")
    )
    priced.write_text(f'name = "x"\nmax_cost_usd = 0.001\n{prices}[evaluation]\nk = [2]\n', "utf-8")
    got = clonemem(
        imported,
        tmp_path / "home",
        "evaluate",
        "release",
        "--systems",
        "bm25",
        "--force",
        "--config",
        str(priced),
    )
    assert got.returncode == 6, got.stderr  # the budget, not "a system failed"
    [line] = errors(got.stderr)
    assert "budget" in line and "Traceback" not in got.stderr
    assert eval_runs(imported) == 0

    plain = tmp_path / "k.toml"
    plain.write_text('name = "x"\n[evaluation]\nk = [2, 4]\n', "utf-8")
    out = tmp_path / "result.json"
    got = clonemem(
        imported,
        tmp_path / "home",
        "evaluate",
        "release",
        "--systems",
        "bm25",
        "--force",
        "--config",
        str(plain),
        "--json",
        str(out),
    )
    assert got.returncode == 0, got.stderr
    assert sorted({r["k"] for r in json.loads(out.read_text("utf-8"))["results"]}) == [2, 4]


@pytest.mark.parametrize(
    "args",
    [["evaluate", "release", "--systems", "bm25", "--k", "2", "--force"], ["gate", "release"]],
)
def test_an_unreachable_prefect_api_is_exit_1_naming_the_url(
    imported: Path, tmp_path: Path, args: list[str]
) -> None:
    url = f"http://127.0.0.1:{closed_port()}/api"
    got = clonemem(imported, tmp_path / "home", *args, PREFECT_API_URL=url, timeout=120)
    assert got.returncode == 1, got.stderr
    [line] = errors(got.stderr)
    assert f"cannot reach the Prefect API at {url}" in line and "PREFECT_API_URL" in line, line
    assert "Traceback" not in got.stderr and "fix the failing system" not in got.stderr
