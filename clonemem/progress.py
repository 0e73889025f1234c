"""Progress of long runs, reported by the flows and shown by whoever listens.

Flows call :func:`advance` as work completes (personas generated, questions written, systems
evaluated); the CLI listens and draws rich progress bars on a terminal or prints plain lines
otherwise; with no listener (a deployment run, a library call) reporting does nothing: those runs
have their per-stage summary lines in the flow log instead.

Long parts of a run (a memory system building a persona's memory can take minutes) are also
:func:`doing` *activities*: while a :func:`heartbeat` is on, a thread logs every ``every_s`` seconds
what is being done and how far it got ("building mem0 for persona p1: 120/400 traces, 37 LLM steps,
running 1 min 40 s"), so a flow log never goes quiet while slow systems build.
"""

from __future__ import annotations

import contextvars
import itertools
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Protocol, TextIO


class Listener(Protocol):
    def update(self, task: str, done: int, total: int) -> None: ...


# a context variable: task and step threads run in a copy of the context that started them
_listener: ContextVar[Listener | None] = ContextVar("clonemem_progress", default=None)
_lock = threading.Lock()


def advance(task: str, done: int, total: int) -> None:
    """``done`` of ``total`` units of ``task`` (e.g. "generation: personas") are finished."""
    board = _board.get()
    if board is not None:
        board.tally(task, done, total)
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


# -- activities and the heartbeat that logs them ------------------------------------------------------


def _elapsed(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes} min {secs} s" if minutes else f"{secs} s"


class Activity:
    """One long piece of work: what (``mem0 for persona p1``), its current phase (``building``), how far
    the phase got in its unit (``120/400 traces``) and the LLM steps it made. Updated from any thread."""

    def __init__(self, what: str, phase: str = "", total: int | None = None, unit: str = "") -> None:
        self.what, self.phase, self.total, self.unit = what, phase, total, unit
        self.done, self.steps, self.started = 0, 0, time.monotonic()
        self._lock = threading.Lock()

    def update(self, done: int, total: int | None = None, phase: str | None = None, unit: str | None = None) -> None:
        with self._lock:
            self.done = done
            self.total = self.total if total is None else total
            self.phase = self.phase if phase is None else phase
            self.unit = self.unit if unit is None else unit

    def advance(self, n: int = 1) -> None:
        with self._lock:
            self.done += n

    def counting(self, step: Callable[..., Any]) -> Callable[..., Any]:
        """``step`` (an LLM step function), counting each call made through it."""
        def counted(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                self.steps += 1
            return step(*args, **kwargs)
        return counted

    def line(self, now: float | None = None) -> str:
        with self._lock:
            done, total, steps, phase, unit = self.done, self.total, self.steps, self.phase, self.unit
        text = f"{phase} {self.what}".strip()
        if total is not None:
            text += f": {done}/{total} {unit}".rstrip()
        if steps:
            text += f", {steps} LLM steps"
        return f"{text}, running {_elapsed((time.monotonic() if now is None else now) - self.started)}"


class _Board:
    """The activities under way and the latest tallies of :func:`advance`, for the heartbeat."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self.activities: dict[int, Activity] = {}
        self.tallies: dict[str, tuple[int, int]] = {}

    def tally(self, task: str, done: int, total: int) -> None:
        with self._lock:
            self.tallies[task] = (done, total)

    @contextmanager
    def showing(self, activity: Activity) -> Iterator[Activity]:
        """``activity`` among those under way for the duration of the block."""
        with self._lock:
            key = next(self._ids)
            self.activities[key] = activity
        try:
            yield activity
        finally:
            with self._lock:
                self.activities.pop(key, None)

    def lines(self) -> list[str]:
        with self._lock:
            shown = list(self.activities.values())
            tallies = dict(self.tallies)
        return ([f"{task}: {done}/{total} done" for task, (done, total) in tallies.items() if done < total]
                + [a.line() for a in shown])


_board: ContextVar[_Board | None] = ContextVar("clonemem_activities", default=None)


@contextmanager
def doing(what: str, phase: str = "", total: int | None = None, unit: str = "") -> Iterator[Activity]:
    """An activity for the duration of the block, shown by the heartbeat when one is on (the activity
    works alike without one: nothing reads it)."""
    activity = Activity(what, phase, total, unit)
    board = _board.get()
    if board is None:
        yield activity
        return
    with board.showing(activity):
        yield activity


@contextmanager
def heartbeat(log: Callable[[str], None], every_s: float, name: str) -> Iterator[None]:
    """While the block runs, log every ``every_s`` seconds one line per activity under way (or, with
    none, how far the block's tasks got): ``name: still working: ...``. The logging thread runs in a
    copy of this context (a flow run's logger reaches it)."""
    board = _Board()
    token = _board.set(board)
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(every_s):
            lines = board.lines() or ["waiting for its tasks"]
            for line in lines:
                log(f"{name}: still working: {line.removeprefix(name + ': ')}")

    thread = threading.Thread(target=contextvars.copy_context().run, args=(beat,), name=f"{name} heartbeat",
                              daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        _board.reset(token)
