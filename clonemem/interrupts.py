"""Ctrl-C ends a command at once, with exit 130 and a line saying what was kept.

A terminal's Ctrl-C sends SIGINT to the whole foreground process group. The ephemeral Prefect server
runs in its own session (``clonemem.prefect_env``), so only this process gets it; this module then:

- raises KeyboardInterrupt in the main thread (Python's default), and remembers the interrupt, so an
  error it causes on the way out (DuckDB's "Query interrupted", a refused connection) still counts as
  the interrupt and not as a failure;
- leaves without waiting for worker threads (Prefect's task threads would finish their whole batch),
  after stopping the Prefect server this process started. Leaving like this is safe: every landing is
  one transaction, so an interrupted one is as if never begun, and finished tasks are in the cache;
- leaves anyway after ``DEADLINE_S`` if the main thread is slow to unwind, and at once on a second
  Ctrl-C.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from types import FrameType
from typing import NoReturn

DEADLINE_S = 3.0
KEPT_WRITING = "interrupted: finished work is landed or cached; run again to resume"
KEPT_READING = "interrupted: nothing was written"

_received = threading.Event()
_finishing = threading.Event()  # the command is done and its process is leaving: nothing left to unwind
_writes = False
_leaving = threading.Lock()


def install() -> None:
    """Take over SIGINT for this process (the CLI's main thread)."""
    signal.signal(signal.SIGINT, _on_sigint)


def received() -> bool:
    """True once Ctrl-C (SIGINT) arrived."""
    return _received.is_set()


def note_writes() -> None:
    """This command writes the warehouse or the cache (its interrupt line says work is kept)."""
    global _writes
    _writes = True


def finishing() -> None:
    """The command has returned; a Ctrl-C from now on (while worker threads drain) leaves at once."""
    _finishing.set()


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    if _received.is_set() or _finishing.is_set():  # a second Ctrl-C, or nothing left to unwind
        _received.set()
        leave()
    _received.set()
    timer = threading.Timer(DEADLINE_S, leave)
    timer.daemon = True
    timer.start()
    raise KeyboardInterrupt


def leave() -> NoReturn:
    """Say what was kept, stop the Prefect server this process started, and exit 130 (callable from any
    thread; the first caller does it)."""
    from clonemem.errors import ExitCode
    from clonemem.prefect_env import stop_servers

    _leaving.acquire()  # a second caller waits here until the process is gone
    try:
        sys.stderr.write("\n" + (KEPT_WRITING if _writes else KEPT_READING) + "\n")
        sys.stderr.flush()
        sys.stdout.flush()
    except (OSError, ValueError):  # the terminal may be gone already
        pass
    stop_servers(grace_s=1.5)
    os._exit(int(ExitCode.INTERRUPTED))
