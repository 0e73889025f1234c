"""One writer at a time: a lock file beside the warehouse (``<warehouse>.lock``).

The lock is an ``flock`` on that file, so the kernel releases it when the holder dies (a
``kill -9`` leaves no stale lock to clean up: the next writer takes it over at once). The file
also records who holds it (PID, command, start time), so a waiting writer can say who it is
waiting for. Within one process the lock is re-entrant: a CLI command takes it for its whole run
and the flows it calls, which open the warehouse again per stage, join that hold.

Waiting: a writer that finds the lock held says so once on stderr ("warehouse is being written
by PID N (`clonemem generate`, started at …); waiting up to S s") and polls; after ``wait_s`` it
raises :class:`WarehouseBusy` ("… try again when it has finished").
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from clonemem import settings
from clonemem.errors import ExitCode, UserError

WAIT_ENV = settings.LOCK_WAIT
POLL_S = 0.25


class WarehouseBusy(RuntimeError, UserError):
    """Another process kept the warehouse for longer than this writer would wait."""

    exit_code = ExitCode.BUSY


@dataclass(frozen=True)
class Holder:
    pid: int
    command: str
    started_at: str

    def describe(self) -> str:
        return f"PID {self.pid} (`{self.command}`, started at {self.started_at})"


def lock_path(warehouse: Path) -> Path:
    return warehouse.with_name(warehouse.name + ".lock")


def default_wait() -> float:
    return settings.current().lock_wait_s


def current_command() -> str:
    """What to call this process in the lock file when the caller does not say (the CLI names its
    subcommand): the whole command line, shortened, so the command is in it wherever options put it."""
    program = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python"
    line = " ".join([program, *sys.argv[1:]])
    return line if len(line) <= 120 else line[:119] + "…"


def read_holder(warehouse: Path) -> Holder | None:
    """Who holds (or last held) the lock, from the file; None if unknown."""
    try:
        data = json.loads(lock_path(warehouse).read_text("utf-8") or "null")
        return (
            Holder(int(data["pid"]), str(data["command"]), str(data["started_at"]))
            if data
            else None
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def is_held_elsewhere(warehouse: Path) -> bool:
    """Whether another process holds the writer lock right now (readers then read a snapshot)."""
    path = lock_path(warehouse)
    if not path.exists():
        return False
    key = str(path.resolve())
    with _registry_lock:
        if key in _held:
            return False
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing drops the probe's shared lock
    return False


@dataclass
class _Hold:
    fd: int
    depth: int


_held: dict[str, _Hold] = {}
_registry_lock = threading.Lock()


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@contextmanager
def writer_lock(
    warehouse: Path,
    *,
    wait_s: float | None = None,
    command: str | None = None,
    notify: Callable[[str], None] = _say,
) -> Iterator[None]:
    """Hold the warehouse's writer lock for the block (re-entrant within this process)."""
    path = lock_path(Path(warehouse).expanduser().resolve())
    key = str(path)
    with _registry_lock:
        hold = _held.get(key)
        if hold is not None:
            hold.depth += 1
    if hold is None:
        hold = _acquire(
            path, default_wait() if wait_s is None else wait_s, command or current_command(), notify
        )
        with _registry_lock:
            _held[key] = hold
    try:
        yield
    finally:
        with _registry_lock:
            hold.depth -= 1
            last = hold.depth == 0
            if last:
                del _held[key]
        if last:
            _release(hold.fd)


def _acquire(path: Path, wait_s: float, command: str, notify: Callable[[str], None]) -> _Hold:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    deadline = time.monotonic() + wait_s
    told = False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            holder = read_holder(path.with_name(path.name.removesuffix(".lock")))
            who = holder.describe() if holder else "another process"
            if time.monotonic() >= deadline:
                os.close(fd)
                raise WarehouseBusy(
                    f"warehouse {str(path).removesuffix('.lock')} is being written by {who}; "
                    "try again when it has finished"
                ) from None
            if not told:
                notify(f"warehouse is being written by {who}; waiting up to {wait_s:g} s...")
                told = True
            time.sleep(POLL_S)
    started = dt.datetime.now().astimezone().isoformat(timespec="seconds")
    info = json.dumps({"pid": os.getpid(), "command": command, "started_at": started})
    os.ftruncate(fd, 0)
    os.pwrite(fd, info.encode("utf-8"), 0)
    return _Hold(fd, 1)


def _release(fd: int) -> None:
    try:
        os.ftruncate(fd, 0)
    except OSError:
        pass
    finally:
        os.close(fd)  # closing the descriptor releases the flock
