"""A real Prefect server, work pool, deployments and process workers on 127.0.0.1, for the deployment
and scale-out tests. Every command is the README's ("Deployments"); each process is started in its own
process group and stopped with its children (the worker forwards SIGINT to its flow runs and may need a
second signal), also when a test fails.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
FINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Stack:
    """``prefect server start`` and workers for one test module; :meth:`stop` ends everything it started."""

    def __init__(self, folder: Path, warehouse: Path, **env: str) -> None:
        self.folder = folder
        self.port = free_port()
        self.api_url = f"http://127.0.0.1:{self.port}/api"
        self.warehouse = warehouse
        # as a user's shell: what this test process set for its own Prefect (logging levels) is not exported
        dropped = {
            "PREFECT_LOGGING_LEVEL",
            "PREFECT_LOGGING_SERVER_LEVEL",
            "CLONEMEM_FAULT_KILL_AT",
            "PREFECT_API_URL",
        }
        self.env = {k: v for k, v in os.environ.items() if k not in dropped}
        self.env.update(
            {
                "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
                "PREFECT_HOME": str(folder / "prefect-home"),
                "PREFECT_API_URL": self.api_url,
                "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
                "DO_NOT_TRACK": "1",
                "CLONEMEM_PROJECT_DIR": str(ROOT),
                "CLONEMEM_WAREHOUSE": str(warehouse),
                "CLONEMEM_DISABLE_LIVE_LLM": "1",
                # workers ask for new runs every 2 s instead of 10 s (the only speed-up over the README's commands)
                "PREFECT_WORKER_QUERY_SECONDS": "2",
                **env,
            }
        )
        self.procs: dict[str, subprocess.Popen] = {}
        self.logs: dict[str, Path] = {}
        self.http = httpx.Client(base_url=self.api_url, timeout=30)

    # -- processes ---------------------------------------------------------------------------------

    def spawn(self, name: str, *args: str) -> subprocess.Popen:
        log = self.folder / f"{name}.log"
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                list(args),
                cwd=ROOT,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self.procs[name], self.logs[name] = proc, log
        return proc

    def start_server(self, timeout: float = 180) -> None:
        proc = self.spawn(
            "server", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(self.port)
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"prefect server exited with {proc.returncode}:\n{self.tail('server')}"
                )
            try:
                if self.http.get("/health", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        raise TimeoutError(f"prefect server not healthy after {timeout} s:\n{self.tail('server')}")

    def start_worker(self, name: str, *extra: str) -> subprocess.Popen:
        return self.spawn(
            name, "prefect", "worker", "start", "--pool", "clonemem", "--name", name, *extra
        )

    def cli(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        got = subprocess.run(
            list(args),
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        if got.returncode != 0:
            raise AssertionError(
                f"{' '.join(args)} exited {got.returncode}:\n{got.stdout[-3000:]}\n{got.stderr[-3000:]}"
            )
        return got

    def kill(self, name: str) -> None:
        """SIGKILL a process, its group and every process below it at once (a lost machine). Prefect
        3.8.8's process worker starts each flow run in a session of its own, so the worker's group alone
        would leave its flow runs running to their end."""
        proc = self.procs.pop(name)
        groups = {proc.pid} | _descendant_groups(proc.pid)
        for group in groups:
            _signal_group(group, signal.SIGKILL)
        proc.wait(timeout=30)
        for group in groups:
            _wait_group_gone(group, 10)

    def stop(self, name: str) -> None:
        """End a process, its group and its descendants' groups: SIGTERM, a second SIGTERM (the worker
        forwards the first to its flow runs and may wait for them), then SIGKILL."""
        proc = self.procs.pop(name)
        groups = {proc.pid}
        for sig, grace in ((signal.SIGTERM, 15), (signal.SIGTERM, 10), (signal.SIGKILL, 10)):
            groups |= _descendant_groups(proc.pid)
            for group in groups:
                _signal_group(group, sig)
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                continue
            if all(_wait_group_gone(group, grace) for group in groups):
                return
        for group in groups:
            _signal_group(group, signal.SIGKILL)
        proc.wait(timeout=10)
        if not all(_wait_group_gone(group, 10) for group in groups):
            raise RuntimeError(f"processes of {name} ({proc.pid}) survived SIGKILL")

    def stop_all(self) -> None:
        """Workers first (their runs report to the server), the server last."""
        self.http.close()
        errors = []
        for name in sorted(self.procs, key=lambda n: n == "server"):
            try:
                self.stop(name)
            except Exception as exc:
                errors.append(f"{name}: {exc}")
        if errors:
            raise RuntimeError("; ".join(errors))

    def tail(self, name: str, lines: int = 60) -> str:
        log = self.logs.get(name)
        return (
            "\n".join(log.read_text("utf-8", "replace").splitlines()[-lines:])
            if log and log.exists()
            else ""
        )

    # -- the API -----------------------------------------------------------------------------------

    def request(self, method: str, path: str, attempts: int = 4, **kwargs: Any) -> Any:
        """One API call, tried again on a transport error (a busy server on 2 shared cores can take longer
        than the client's timeout now and then: SQLite is one writer)."""
        for attempt in range(attempts):
            try:
                got = self.http.request(method, path, **kwargs)
                got.raise_for_status()
                return got.json()
            except httpx.TransportError:
                if attempt == attempts - 1:
                    raise
                time.sleep(2)
        raise AssertionError("unreachable")

    def deployment(self, name: str) -> dict[str, Any]:
        return self.request("GET", f"/deployments/name/{name}")

    def flow_run(self, run_id: str) -> dict[str, Any]:
        return self.request("GET", f"/flow_runs/{run_id}")

    def flow_runs(self, **filters: Any) -> list[dict[str, Any]]:
        return self.request("POST", "/flow_runs/filter", json={"flow_runs": filters, "limit": 200})

    def run_deployment(self, name: str, params: dict[str, Any]) -> str:
        """`prefect deployment run NAME --params JSON`; returns the new flow run's id."""
        out = self.cli("prefect", "deployment", "run", name, "--params", json.dumps(params)).stdout
        for line in out.splitlines():
            if "UUID:" in line:
                return line.split("UUID:")[1].strip()
        raise AssertionError(f"no flow run id in:\n{out}")

    def wait(
        self, run_id: str, timeout: float = 400, states: Iterable[str] = FINAL
    ) -> dict[str, Any]:
        """Poll until the flow run is in one of ``states``; returns it."""
        states = set(states)
        deadline = time.monotonic() + timeout
        run = self.flow_run(run_id)
        while run["state"]["type"] not in states:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"flow run {run_id} still {run['state']['type']} after {timeout} s\n"
                    + "\n".join(f"--- {n}\n{self.tail(n, 30)}" for n in self.logs)
                )
            time.sleep(1)
            run = self.flow_run(run_id)
        return run

    def hosts(self) -> dict[str, str]:
        """Flow run id -> the name of the worker (started here) whose process tree runs it, right now."""
        stats = _stats()
        out = {}
        for name, proc in self.procs.items():
            if name != "server":
                for pid in _descendants(proc.pid, stats):
                    run_id = _env(pid).get("PREFECT__FLOW_RUN_ID")
                    if run_id:
                        out[run_id] = name
        return out


# -- process groups (Linux /proc) --------------------------------------------------------------------


def _stats() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, process group) of every live process."""
    out = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z":  # zombies are already dead
                out[int(entry.name)] = (int(fields[1]), int(fields[2]))
    return out


def _group(pgid: int) -> list[int]:
    return [pid for pid, (_, group) in _stats().items() if group == pgid]


def _descendants(pid: int, stats: dict[int, tuple[int, int]] | None = None) -> list[int]:
    stats = _stats() if stats is None else stats
    children: dict[int, list[int]] = {}
    for child, (parent, _) in stats.items():
        children.setdefault(parent, []).append(child)
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _descendant_groups(pid: int) -> set[int]:
    """The process groups of every live process below ``pid`` (flow runs have sessions of their own)."""
    stats = _stats()
    return {stats[p][1] for p in _descendants(pid, stats) if p in stats}


def _env(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    return dict(kv.split("=", 1) for kv in raw.decode("utf-8", "replace").split("\0") if "=" in kv)


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def _wait_group_gone(pgid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while _group(pgid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True
