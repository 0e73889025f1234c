"""Warehouses for the dashboard tests and helpers that read what a page shows (AppTest elements, the data
inside its Altair charts) next to what SQL says over the same warehouse."""

from __future__ import annotations

import functools
import io
import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pyarrow.ipc
from streamlit.testing.v1 import AppTest

from clonemem.dashboard import APP, PAGES
from clonemem.demo import fixture_files
from clonemem.importers import import_files
from clonemem.thirdparty import written_for
from clonemem.warehouse import Warehouse

LOCOMO = Path(__file__).parent / "fixtures" / "locomo" / "conv-mini.json"
SCRIPTS = {title: script for title, script, _url in PAGES}


# -- warehouses -----------------------------------------------------------------------------------------


def imported_warehouse(path: Path) -> Path:
    """The release fixture as 'release' and the LoCoMo fixture as 'locomo' (no Prefect: seconds)."""
    with Warehouse.open_writer(path) as wh:
        import_files(wh, "release", fixture_files(), "release")
        import_files(wh, "locomo", [LOCOMO], "locomo")
    return path


def full_warehouse(folder: Path) -> Path:
    """A tiny generated benchmark 'tiny' (stages I–IV, one gate run that fails on strict bounds and one
    that passes, two evaluations with bm25 and random, over questions and as the mean of persona means),
    plus the imports of ``imported_warehouse`` with
    'release' evaluated once. Runs the real flows in this process."""
    from clonemem.expectations.gate import run_gate
    from clonemem.flows.evaluation import evaluate_flow
    from clonemem.flows.pipeline import pipeline_flow
    from clonemem.schemas.config import EvaluationConfig, GateConfig, RunConfig, load_config
    from tests.pipeline_kit import tiny_config

    path = folder / "wh.duckdb"
    cfg = load_config(tiny_config(folder))
    pipeline_flow(str(path), cfg, gate=False, evaluate=False)
    strict = GateConfig(max_rejection_rate=0.0, heuristic_margin=0.0, media_mix_tolerance=0.0)
    assert run_gate(path, "tiny", gate=strict, docs_dir=folder / "gx-strict").status == "failed"
    assert run_gate(path, "tiny", gate=cfg.gate, docs_dir=folder / "gx").status == "passed"
    imported_warehouse(path)
    defaults = RunConfig()
    # two different evaluations (an identical re-run would not be stored again): the second aggregates as
    # the paper does
    for aggregate in ("questions", "personas"):
        evaluate_flow(
            str(path),
            "tiny",
            ["bm25", "random"],
            [1, 3],
            config=defaults.model_copy(
                update={"evaluation": EvaluationConfig(aggregate=aggregate)}
            ),
        )
    evaluate_flow(str(path), "release", ["bm25", "random"], [1, 3], force=True, config=defaults)
    return path


def sql(path: Path, query: str, params: list | None = None) -> pl.DataFrame:
    """A plain read-only DuckDB query, independent of the dashboard's own reading path."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        cur = con.execute(query, params or [])
        names = [d[0] for d in cur.description]
        return pl.DataFrame(cur.fetchall(), schema=names, orient="row", infer_schema_length=None)
    finally:
        con.close()


def benchmark_id(path: Path, name: str) -> str:
    return sql(path, "SELECT benchmark_id FROM benchmarks WHERE name = ?", [name])["benchmark_id"][
        0
    ]


# -- the app under AppTest ------------------------------------------------------------------------------


@functools.cache
def _components() -> Any:
    """Streamlit's server discovers the installed components once per process, when its runtime starts;
    AppTest does it for every app (reading the metadata of every installed distribution: 1.2 of a page's
    1.7 s here). The tests share one discovery, as the pages of one server do."""
    from streamlit.components.v2.component_manager import BidiComponentManager

    manager = BidiComponentManager()
    manager.discover_and_register_components(start_file_watching=False)
    return manager


def app(page: str = "Benchmarks", benchmark: str | None = None, **query: str) -> AppTest:
    """Run the app (warehouse from $CLONEMEM_WAREHOUSE) on one page, optionally with ?benchmark=NAME."""
    at = AppTest.from_file(str(APP), default_timeout=60)
    written_for("streamlit", "1.67.0", "tests/dashboard_kit.py (AppTest._bidi_component_manager)")
    at._bidi_component_manager = _components()
    if benchmark:
        at.query_params["benchmark"] = benchmark
    for k, v in query.items():
        at.query_params[k] = v
    at.run()
    if page != "Benchmarks":
        at.switch_page(SCRIPTS[page]).run()
    assert_clean(at, page)
    return at


def assert_clean(at: AppTest, page: str) -> None:
    assert not at.exception, [e.message for e in at.exception]
    assert [t.value for t in at.title] == [page]


def frame(at: AppTest, *columns: str) -> pl.DataFrame:
    """The first table on the page that has all these columns (as polars)."""
    for df in at.dataframe:
        value = df.value
        if set(columns) <= set(value.columns):
            return pl.from_pandas(value.reset_index(drop=True))
    raise AssertionError(
        f"no table with columns {columns}; tables: {[list(d.value.columns) for d in at.dataframe]}"
    )


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def charts(at: AppTest) -> list[dict[str, pl.DataFrame]]:
    """Each Altair chart on the page: its datasets (name -> frame) as the browser receives them."""
    out = []
    for el in at.get("vega_lite_chart"):
        out.append(
            {
                d.name: pl.from_arrow(pyarrow.ipc.open_stream(io.BytesIO(d.data.data)).read_all())
                for d in el.proto.datasets
            }
        )
    return out


def chart_specs(at: AppTest) -> list[dict]:
    return [json.loads(el.proto.spec) for el in at.get("vega_lite_chart")]


def texts(at: AppTest) -> str:
    """All messages on the page (info, warning, error, caption, markdown) as one string."""
    parts = [
        e.value for kind in (at.info, at.warning, at.error, at.caption, at.markdown) for e in kind
    ]
    return "\n".join(str(p) for p in parts)


# -- processes (browser test) ---------------------------------------------------------------------------


def descendants(pid: int) -> list[int]:
    """Every live process whose parent chain leads to ``pid`` (from /proc)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8") as fh:
                stat = fh.read()
        except OSError:
            continue
        parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    out, frontier = [], [pid]
    while frontier:
        current = frontier.pop()
        children = [p for p, pp in parents.items() if pp == current]
        out += children
        frontier += children
    return out


def _state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def stop(pid: int, timeout: float = 10.0) -> None:
    """SIGTERM one process we started, then SIGKILL if it is still there after ``timeout``."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            finished, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:  # not our child: gone, or a zombie its own parent will reap
            finished = pid if _state(pid) in (None, "Z") else 0
        if finished:
            return
        time.sleep(0.1)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(port: int, server: subprocess.Popen, timeout: float = 60.0) -> None:
    """Until a started dashboard answers its health check (an AssertionError if it exits or never does)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise AssertionError(
                f"dashboard exited: {server.stdout.read().decode(errors='replace')}"
            )
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise AssertionError("dashboard did not become healthy")
