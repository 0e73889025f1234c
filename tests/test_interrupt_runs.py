"""Interrupts are interrupts (issue 31, item 4): in 1 of 5 Ctrl-C of `generate` on a terminal, both run
rows ended ``failed`` with ``error = "Task run is not set"`` (an error Prefect's engine raised while the
KeyboardInterrupt unwound a task) instead of ``interrupted``.

`clonemem generate` runs on a pseudo-terminal (its controlling terminal: ``\\x03`` typed into it is a
user's Ctrl-C, sent by the terminal driver to the foreground process group) and is interrupted 20 times
at points spread over its start (imports: a Ctrl-C inside duckdb's initialisation aborted the process
with exit -6), the run's first writes, generation, landing and stage IV; every time it exits 130 and
every run row it wrote is ``interrupted``, but a stage's that finished before the Ctrl-C (``completed``). The runs share one Prefect server (started once here) so that each
costs seconds instead of an ephemeral server's start; each has its own warehouse and Prefect home (its
own step cache: no run is served from another's)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from clonemem.warehouse import Warehouse
from tests.pipeline_kit import env_for, tiny_config
from tests.prefect_server_kit import free_port
from tests.test_interrupts import Terminal

pytestmark = [pytest.mark.slow, pytest.mark.timing, pytest.mark.timeout(900)]

TIMES = 20
# when each Ctrl-C comes: seconds after the command started (its imports and start), then seconds after
# the run's first write (the warehouse file appears), over generation, its landings and stage IV
EARLY_S = (1.5, 2.0, 2.5, 3.0, 4.0)
AFTER_START_S = tuple(round(i * 0.7, 1) for i in range(TIMES - len(EARLY_S)))
AT_ONCE = 2  # commands interrupted side by side


def interrupted_as_it_should(rows: dict[str, tuple]) -> bool:
    """Every run row the command wrote ended: the pipeline's and the stage's it was in ``interrupted``;
    a stage that finished before the Ctrl-C (generation, when it came during stage IV) ``completed``
    with no error; nothing left ``running`` or ``failed``."""
    ended = {"interrupted", "completed"}
    return (
        all(status in ended for status, _ in rows.values())
        and all(error is None for status, error in rows.values() if status == "completed")
        and rows.get("pipeline", ("interrupted",))[0] == "interrupted"
        and (not rows or any(status == "interrupted" for status, _ in rows.values()))
    )


def prefect_server(folder: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {
        **os.environ,
        "PREFECT_HOME": str(folder / "server-home"),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "DO_NOT_TRACK": "1",
    }
    env.pop("PREFECT_API_URL", None)
    proc = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "prefect"),
            "server",
            "start",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}/api"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/health", timeout=5, trust_env=False).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        time.sleep(1)
    proc.kill()
    raise AssertionError("the Prefect server did not start within 180 s")


def interrupted_once(
    folder: Path, config: Path, api_url: str, point: tuple[str, float]
) -> tuple[int | None, dict, str]:
    """`generate` interrupted at ``point`` (``("start", s)``: s seconds after it started; ``("written", s)``:
    after its first write): its exit code, its run rows, its output."""
    folder.mkdir()
    wh = folder / "wh.duckdb"
    term = Terminal(
        ["--warehouse", str(wh), "generate", "--config", str(config)],
        env_for(folder / "home", PREFECT_API_URL=api_url),
    )
    try:
        since, after_s = point
        if since == "written":
            deadline = time.monotonic() + 180
            while not wh.exists() and term.proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
        time.sleep(after_s)
        if term.proc.poll() is None:
            term.ctrl_c()
    finally:
        if term.proc.poll() is None:
            term.proc.kill()
            term.proc.wait()
    rows: dict = {}
    if wh.exists():
        with Warehouse.open_reader(wh) as r:
            rows = {
                kind: (status, error)
                for kind, status, error in r.rows("SELECT kind, status, error FROM runs")
            }
    return term.proc.returncode, rows, term.tail()


def test_every_ctrl_c_of_generate_leaves_its_runs_interrupted(tmp_path: Path) -> None:
    # slow offline calls: generation and stage IV take a minute, so every Ctrl-C lands mid-run
    config = tiny_config(tmp_path, personas=2, latency_ms=150)
    server, api_url = prefect_server(tmp_path)
    try:
        points = [("start", s) for s in EARLY_S] + [("written", s) for s in AFTER_START_S]
        with ThreadPoolExecutor(AT_ONCE) as pool:
            results = list(
                pool.map(
                    lambda i: interrupted_once(tmp_path / f"run{i}", config, api_url, points[i]),
                    range(TIMES),
                )
            )
    finally:
        os.killpg(server.pid, 15)
        server.wait(30)
    wrong = [
        (points[i], code, rows, tail[-400:])
        for i, (code, rows, tail) in enumerate(results)
        if code != 130 or not interrupted_as_it_should(rows)
    ]
    landed = sum(1 for _, rows, _ in results if rows)
    print(f"{TIMES} interrupts: {points}; {landed} had written run rows")
    assert not wrong, wrong
    assert landed >= len(AFTER_START_S) * 2 // 3, (
        landed
    )  # most Ctrl-Cs came after the run began writing
