"""Ctrl-C in a real terminal: the CLI runs on a pty that is its controlling terminal, and ``\\x03`` is typed
into it, so the terminal driver sends SIGINT to the whole foreground process group (as a user's Ctrl-C
does; a ``kill -INT`` of the CLI alone would miss what reaches its children). Every command ends within
5 s with exit 130 and a line saying what was kept, and leaves no process behind."""

from __future__ import annotations

import fcntl
import os
import subprocess
import termios
import threading
import time
from pathlib import Path

import pytest

from clonemem.demo import fixture_files
from clonemem.importers import import_files
from clonemem.interrupts import DEADLINE_S
from clonemem.warehouse import Warehouse
from tests.dashboard_kit import descendants
from tests.pipeline_kit import EXE, env_for, tiny_config

pytestmark = [pytest.mark.slow, pytest.mark.timing, pytest.mark.timeout(600)]


class Terminal:
    """``clonemem ARGS`` with a new pty as its controlling terminal (stdin, stdout and stderr)."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        master, slave = os.openpty()
        self.master = master
        self.proc = subprocess.Popen(
            [EXE, *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            close_fds=True,
            # a session of its own, whose controlling terminal is the pty (fd 0 after the redirect)
            start_new_session=True,
            preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0),
        )
        os.close(slave)
        self.output = bytearray()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:  # EIO: every process holding the pty's other end is gone
                return
            if not chunk:
                return
            self.output += chunk

    def text(self) -> str:
        return self.output.decode("utf-8", "replace")

    def tail(self) -> str:
        """The end of what the terminal shows (progress bars redraw one line many times)."""
        return self.text()[-1500:]

    def wait_for(self, predicate, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"the command ended (exit {self.proc.returncode}) before {what}:\n{self.tail()}"
                )
            if predicate():
                return
            time.sleep(0.2)
        raise AssertionError(f"no {what} within {timeout} s:\n{self.tail()}")

    def ctrl_c(self) -> float:
        """Type Ctrl-C; the seconds until the command ended (AssertionError after 30 s)."""
        typed = time.monotonic()
        os.write(self.master, b"\x03")
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError(f"still running 30 s after Ctrl-C:\n{self.tail()}") from None
        took = time.monotonic() - typed
        self._reader.join(5)
        os.close(self.master)
        return took


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def cmdline(pid: int) -> str:
    try:
        return (
            Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        )
    except OSError:
        return ""


def prefect_server(pid: int) -> list[int]:
    return [p for p in descendants(pid) if "uvicorn" in cmdline(p)]


def test_ctrl_c_during_generate_ends_it_within_5_s_with_exit_130(tmp_path: Path) -> None:
    # slow offline calls: the run lasts minutes, so Ctrl-C lands mid-run
    cfg = tiny_config(tmp_path, personas=2, latency_ms=150)
    wh, home = tmp_path / "wh.duckdb", tmp_path / "home"
    term = Terminal(["--warehouse", str(wh), "generate", "--config", str(cfg)], env_for(home))
    try:
        term.wait_for(lambda: prefect_server(term.proc.pid), 120, "Prefect server")
        term.wait_for(
            lambda: "stage" in term.text().lower() or "generat" in term.text().lower(),
            120,
            "progress",
        )
        time.sleep(3)  # well inside the run: stage tasks in flight on worker threads
        children = descendants(term.proc.pid)
        took = term.ctrl_c()
    finally:
        if term.proc.poll() is None:
            term.proc.kill()
    out = term.text()
    print(f"ended {took:.2f} s after Ctrl-C")
    assert term.proc.returncode == 130, term.tail()
    assert took < 5, (took, term.tail())
    assert "interrupted: finished work is landed or cached; run again to resume" in out
    assert "Traceback" not in out and "ConnectError" not in out and "error:" not in out, term.tail()
    assert children and not [p for p in children if alive(p)], [
        cmdline(p) for p in children if alive(p)
    ]


def test_ctrl_c_during_a_long_sql_query_is_exit_130(tmp_path: Path) -> None:
    wh = tmp_path / "wh.duckdb"
    with Warehouse.open_writer(wh) as w:
        import_files(w, "release", fixture_files(), "release")
    query = "SELECT sum(a.range * b.range) FROM range(200000) a, range(200000) b"  # minutes on two threads
    term = Terminal(
        ["--warehouse", str(wh), "sql", query, "--timeout", "300"], env_for(tmp_path / "home")
    )
    try:
        time.sleep(4)  # started, and inside the query
        assert term.proc.poll() is None, term.tail()
        took = term.ctrl_c()
    finally:
        if term.proc.poll() is None:
            term.proc.kill()
    out = term.text()
    print(f"ended {took:.2f} s after Ctrl-C")
    assert term.proc.returncode == 130, term.tail()
    assert took < 5, (took, term.tail())
    assert took < DEADLINE_S, (
        took
    )  # the query itself was stopped, before the safety deadline would end it
    assert "interrupted: nothing was written" in out
    assert "Traceback" not in out and "error:" not in out, term.tail()
