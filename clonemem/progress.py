"""Progress of long runs, reported by the flows and shown by whoever listens.

Flows call :func:`advance` as work completes (personas generated, questions written, systems
evaluated); the CLI listens and draws rich progress bars on a terminal or prints plain lines
otherwise; with no listener (a deployment run, a library call) reporting does nothing: those runs
have their per-stage summary lines in the flow log instead.

Long parts of a run (a memory system building a persona's memory can take minutes, a persona's
generation hundreds of LLM steps) are also :func:`doing` *activities*, named with the stage they belong
to (:func:`staged`): while a :func:`heartbeat` is on, a thread logs every ``every_s`` seconds what is
being done and how far it got ("evaluation: building mem0 for persona p1: 120/400 traces, 37 LLM steps,
running 1 min 40 s"), so a flow log never goes quiet while slow systems build; and while the CLI shows
progress (:func:`shown`), the same lines reach the terminal whenever nothing else was shown for
:data:`QUIET_S` seconds, so a command never looks stuck (a count that does not move for minutes says
nothing of what is under way).
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
from typing import TYPE_CHECKING, Any, Protocol, TextIO

if TYPE_CHECKING:
    from rich.progress import TaskID  # rich loads only when bars are shown

# the CLI shows what is under way after this many seconds without a progress line (at most 10 s apart)
QUIET_S = 5.0


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
        self.shown_at = time.monotonic()  # when a line was last shown (see `Ticker`)

    def update(self, task: str, done: int, total: int) -> None:
        now = time.monotonic()
        if done < total and now - self._last.get(task, -1e9) < self.every_s:
            return
        self._last[task] = now
        self.say(f"{task}: {done}/{total}")

    def say(self, line: str) -> None:
        print(f"  {line}", file=self.out, flush=True)
        self.shown_at = time.monotonic()


class Bars:
    """rich progress bars (one per task) on a terminal."""

    def __init__(self, out: TextIO = sys.stderr) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=Console(file=out),
            transient=False,
        )
        self._tasks: dict[str, TaskID] = {}
        self.shown_at = time.monotonic()

    def update(self, task: str, done: int, total: int) -> None:
        if task not in self._tasks:
            self._tasks[task] = self._progress.add_task(task, total=total)
        self._progress.update(self._tasks[task], completed=done, total=total)
        self.shown_at = time.monotonic()

    def say(self, line: str) -> None:
        """A line above the bars (they stay at the bottom)."""
        self._progress.console.print(f"  {line}", highlight=False, markup=False)
        self.shown_at = time.monotonic()

    def __enter__(self) -> Bars:
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()


class Display(Listener, Protocol):
    shown_at: float

    def say(self, line: str) -> None: ...


@contextmanager
def shown(out: TextIO | None = None, quiet_s: float = QUIET_S) -> Iterator[None]:
    """Show progress for the duration: bars on a terminal, plain lines otherwise; and, after ``quiet_s``
    seconds without a line, what is under way (:func:`ticking`). The default is the standard error of
    the moment, not of import time (a test runner swaps it per command)."""
    out = out or sys.stderr
    if out.isatty():
        with Bars(out) as bars, listening(bars), ticking(bars, quiet_s):
            yield
    else:
        plain = PlainLines(out)
        with listening(plain), ticking(plain, quiet_s):
            yield


@contextmanager
def ticking(display: Display, quiet_s: float) -> Iterator[None]:
    """While the block runs, whenever ``display`` showed nothing for ``quiet_s`` seconds, show one line per
    count under way and activity (stage, what, how far: the board's lines), or that the command is still
    starting. The board is this block's unless one is on already (the activities of the flows it runs
    report to it)."""
    board = _board.get() or _Board()
    token = None if _board.get() is board else _board.set(board)
    stop = threading.Event()
    started = time.monotonic()

    def tick() -> None:
        while not stop.wait(min(1.0, quiet_s / 2)):
            if time.monotonic() - display.shown_at < quiet_s:
                continue
            with _lock:
                for line in board.lines() or [f"starting: {_elapsed(time.monotonic() - started)}"]:
                    display.say(line)

    thread = threading.Thread(target=tick, name="clonemem-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        if token is not None:
            _board.reset(token)


# -- activities and the heartbeat that logs them ------------------------------------------------------


def _elapsed(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes} min {secs} s" if minutes else f"{secs} s"


class Activity:
    """One long piece of work: what (``mem0 for persona p1``), its current phase (``building``), how far
    the phase got in its unit (``120/400 traces``) and the LLM steps it made. Updated from any thread."""

    def __init__(
        self, what: str, phase: str = "", total: int | None = None, unit: str = ""
    ) -> None:
        self.what, self.phase, self.total, self.unit = what, phase, total, unit
        self.done, self.steps, self.started = 0, 0, time.monotonic()
        self.stage = (
            _stage.get()
        )  # the stage it belongs to ("generation", "evaluation"), named in its line
        self.finished = False
        self._lock = threading.Lock()

    def grow(self, n: int = 1) -> None:
        """``n`` more units to do (work whose size is found as it goes, such as a persona's LLM steps)."""
        with self._lock:
            self.total = (self.total or 0) + n

    def finish(self) -> None:
        """Done: no longer shown (its block may go on with other work)."""
        self.finished = True

    def update(
        self, done: int, total: int | None = None, phase: str | None = None, unit: str | None = None
    ) -> None:
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
            done, total, steps, phase, unit = (
                self.done,
                self.total,
                self.steps,
                self.phase,
                self.unit,
            )
        text = f"{phase} {self.what}".strip()
        if self.stage and not text.startswith(self.stage):
            text = f"{self.stage}: {text}"
        if total is not None:
            text += f": {done}/{total} {unit}".rstrip()
        if steps:
            text += f", {steps} LLM steps"
        return (
            f"{text}, running {_elapsed((time.monotonic() if now is None else now) - self.started)}"
        )


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
            shown = [a for a in self.activities.values() if not a.finished]
            tallies = dict(self.tallies)
        return [
            f"{task}: {done}/{total} done"
            for task, (done, total) in tallies.items()
            if done < total
        ] + [a.line() for a in shown]


_board: ContextVar[_Board | None] = ContextVar("clonemem_activities", default=None)
_stage: ContextVar[str] = ContextVar("clonemem_stage", default="")


@contextmanager
def staged(name: str) -> Iterator[None]:
    """The activities begun inside belong to stage ``name`` (their lines say so)."""
    token = _stage.set(name)
    try:
        yield
    finally:
        _stage.reset(token)


@contextmanager
def doing(
    what: str, phase: str = "", total: int | None = None, unit: str = ""
) -> Iterator[Activity]:
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
    copy of this context (a flow run's logger reaches it). The board is the one on already, if any (the
    CLI's: it shows the same activities), else its own."""
    board = _board.get() or _Board()
    token = None if _board.get() is board else _board.set(board)
    stage = _stage.set(name)
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(every_s):
            lines = board.lines() or ["waiting for its tasks"]
            for line in lines:
                log(f"{name}: still working: {line.removeprefix(name + ': ')}")

    thread = threading.Thread(
        target=contextvars.copy_context().run, args=(beat,), name=f"{name} heartbeat", daemon=True
    )
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        _stage.reset(stage)
        if token is not None:
            _board.reset(token)
