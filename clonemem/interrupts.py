"""Ctrl-C ends a command at once, with exit 130 and a line saying what was kept.

A terminal's Ctrl-C sends SIGINT to the whole foreground process group. The ephemeral Prefect server
runs in its own session (``clonemem.prefect_env``), so only this process gets it; this module then:

- raises KeyboardInterrupt in the main thread (as Python does), and remembers the interrupt, so an
  error it causes on the way out (a stopped query, a refused connection, an error of Prefect's engine
  caught mid-step) still counts as the interrupt and not as a failure (a run's row ends
  ``interrupted``);
- but not inside an import: a C extension whose initialisation is interrupted (duckdb's, by a
  KeyboardInterrupt raised in the Python code it runs) aborts the whole process (SIGABRT, exit -6, a
  traceback). The interrupt is raised as soon as the import is done (a thread sends the signal again);
- tells work running in C code at once, from a watcher thread woken by the signal's wakeup fd (a
  DuckDB query runs Python's signal handlers only when it returns): see ``interrupting``;
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
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import NoReturn

DEADLINE_S = 3.0
KEPT_WRITING = "interrupted: finished work is landed or cached; run again to resume"
KEPT_READING = "interrupted: nothing was written"

_received = threading.Event()
_raised = threading.Event()  # KeyboardInterrupt was raised in the main thread (once is enough)
_resent = (
    threading.Event()
)  # the SIGINT on its way is ours, sent again after an import: not a second Ctrl-C
_finishing = (
    threading.Event()
)  # the command is done and its process is leaving: nothing left to unwind
_writes = False
_leaving = threading.Lock()
_hooks: list[Callable[[], None]] = []
_last_words: list[Callable[[], None]] = []
LAST_WORDS_S = 1.5  # what a leaving process may still write (its runs' rows), at most


def install() -> None:
    """Take over SIGINT for this process (call from the main thread, first thing)."""
    signal.signal(signal.SIGINT, _on_sigint)
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    signal.set_wakeup_fd(
        write_end, warn_on_full_buffer=False
    )  # written by the C-level handler at once
    threading.Thread(
        target=_watch, args=(read_end,), name="clonemem-interrupts", daemon=True
    ).start()


@contextmanager
def last_words(hook: Callable[[], None]) -> Iterator[None]:
    """Within this block, a Ctrl-C that makes this process leave calls ``hook`` (with :data:`LAST_WORDS_S`
    to do it): for records that must say the command was interrupted although the thread that keeps them
    never saw the KeyboardInterrupt (it reaches the main thread only). A block that ends without a Ctrl-C
    forgets its hook (a process running many commands keeps none of theirs); after a Ctrl-C the hook stays
    for :func:`leave`, which runs once the main thread has unwound."""
    _last_words.append(hook)
    try:
        yield
    finally:
        if not _received.is_set():
            _last_words.remove(hook)


def _say_last_words() -> None:
    for hook in list(_last_words):
        worker = threading.Thread(target=_quietly, args=(hook,), daemon=True)
        worker.start()
        worker.join(LAST_WORDS_S)


def _quietly(hook: Callable[[], None]) -> None:
    try:
        hook()
    except Exception:  # the process is leaving: what could not be written, the next run finds
        pass


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


@contextmanager
def interrupting(stop: Callable[[], None]) -> Iterator[None]:
    """Within this block a Ctrl-C also calls ``stop`` at once, from another thread: for work that runs in
    C code and would notice the signal only when done (``stop`` makes it raise, e.g. a DuckDB
    connection's ``interrupt``)."""
    _hooks.append(stop)
    try:
        yield
    finally:
        _hooks.remove(stop)


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    _received.set()
    if _finishing.is_set() or _raised.is_set():
        return  # the watcher thread leaves
    if importing(frame):
        threading.Thread(
            target=_resend_after_import, name="clonemem-interrupt-resend", daemon=True
        ).start()
        return
    _raised.set()
    raise KeyboardInterrupt


def importing(frame: FrameType | None) -> bool:
    """Whether ``frame`` runs inside an import (importlib's frames are on its stack)."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


def _resend_after_import(poll_s: float = 0.02) -> None:
    """Send SIGINT to the main thread again once it is out of the import it was in (see the module's doc)."""
    main = threading.main_thread().ident
    assert main is not None
    while not (_raised.is_set() or _finishing.is_set()):
        if not importing(sys._current_frames().get(main)):
            _resent.set()
            signal.pthread_kill(main, signal.SIGINT)
            return
        time.sleep(poll_s)


def _watch(fd: int) -> None:
    count = 0
    while True:
        try:
            data = os.read(fd, 64)
        except OSError:
            return
        if not data:
            return
        for signum in data:
            if signum != signal.SIGINT:
                continue
            if _resent.is_set():  # ours, after an import: the same Ctrl-C
                _resent.clear()
                continue
            count += 1
            if count > 1 or _finishing.is_set():
                leave()
            _received.set()
            for stop in list(_hooks):
                try:
                    stop()
                except Exception:
                    pass
            timer = threading.Timer(DEADLINE_S, leave)
            timer.daemon = True
            timer.start()


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
    _say_last_words()
    stop_servers(grace_s=1.5)
    os._exit(int(ExitCode.INTERRUPTED))
