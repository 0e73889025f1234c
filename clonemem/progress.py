"""Progress of long runs, reported by the flows and shown by whoever listens.

Flows call :func:`advance` as work completes (personas generated, questions written, systems
evaluated); the CLI listens and draws rich progress bars on a terminal or prints plain lines
otherwise; with no listener (a deployment run, a library call) reporting does nothing: those runs
have their per-stage summary lines in the flow log instead.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Protocol, TextIO


class Listener(Protocol):
    def update(self, task: str, done: int, total: int) -> None: ...


# a context variable: task and step threads run in a copy of the context that started them
_listener: ContextVar[Listener | None] = ContextVar("clonemem_progress", default=None)
_lock = threading.Lock()


def advance(task: str, done: int, total: int) -> None:
    """``done`` of ``total`` units of ``task`` (e.g. "generation: personas") are finished."""
    listener = _listener.get()
    if listener is not None:
        with _lock:
            listener.update(task, done, total)


@contextmanager
def listening(listener: Listener) -> Iterator[Listener]:
    token = _listener.set(listener)
    try:
        yield listener
    finally:
        _listener.reset(token)


class PlainLines:
    """One line per change, at most one per task every ``every_s`` seconds (and always the last)."""

    def __init__(self, out: TextIO = sys.stderr, every_s: float = 5.0) -> None:
        self.out, self.every_s = out, every_s
        self._last: dict[str, float] = {}

    def update(self, task: str, done: int, total: int) -> None:
        now = time.monotonic()
        if done < total and now - self._last.get(task, -1e9) < self.every_s:
            return
        self._last[task] = now
        print(f"  {task}: {done}/{total}", file=self.out, flush=True)


class Bars:
    """rich progress bars (one per task) on a terminal."""

    def __init__(self, out: TextIO = sys.stderr) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                  TimeElapsedColumn(), console=Console(file=out), transient=False)
        self._tasks: dict[str, int] = {}

    def update(self, task: str, done: int, total: int) -> None:
        if task not in self._tasks:
            self._tasks[task] = self._progress.add_task(task, total=total)
        self._progress.update(self._tasks[task], completed=done, total=total)

    def __enter__(self) -> Bars:
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()


@contextmanager
def shown(out: TextIO | None = None) -> Iterator[None]:
    """Show progress for the duration: bars on a terminal, plain lines otherwise. The default is the
    standard error of the moment, not of import time (a test runner swaps it per command)."""
    out = out or sys.stderr
    if out.isatty():
        with Bars(out) as bars, listening(bars):
            yield
    else:
        with listening(PlainLines(out)):
            yield
