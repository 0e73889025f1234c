"""The run context shared by a flow's tasks: configuration, models, the call sink.

Prefect task parameters must be hashable inputs for caching, so live objects (clients, the
warehouse writer) travel here instead; what affects outputs (model ref, seed, template) is part of
each task's cache key through :class:`clonemem.tasks.caching.StagePolicy`.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from clonemem.llm.model import Budget, CallSink, MemorySink, Model, ProviderHealth, get_model
from clonemem.llm.types import CallRecord, LLMError, Paid
from clonemem.schemas.config import Role, RunConfig

if TYPE_CHECKING:
    from clonemem.stages import In, Out, Stage  # stages build on the LLM layer this module wraps

T = TypeVar("T")


@dataclass
class Runtime:
    config: RunConfig
    sink: CallSink | None = None
    run_id: str | None = None
    budget: Budget | None = None  # the config's max_cost_usd, shared by every model of the run
    warehouse: str | None = (
        None  # where the run's results land (its calls are that warehouse's spend)
    )
    on_start: Callable[[], None] | None = None  # records the run before its first call goes out
    _models: dict[str, Model] = field(default_factory=dict)
    _health: dict[str, ProviderHealth] = field(
        default_factory=dict
    )  # per provider, shared by its roles
    _made: MemorySink = field(default_factory=MemorySink)  # every call the run made (see `made`)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _start_lock: threading.Lock = field(default_factory=threading.Lock)
    _started: bool = False

    def __post_init__(self) -> None:
        if self.budget is None:
            self.budget = _budget.get() or (
                Budget(self.config.max_cost_usd) if self.config.max_cost_usd else None
            )

    def start(self) -> None:
        """Run ``on_start`` once, before the run's first step that calls a model (a step served from the
        cache never gets here, so a re-run with nothing to do writes nothing). Every step waits for it."""
        if self._started or self.on_start is None:
            return
        with self._start_lock:
            if not self._started:
                self.on_start()
                self._started = True

    def model(self, role: Role) -> Model:
        with self._lock:
            if role not in self._models:
                provider = self.config.models.ref(role).provider
                health = self._health.setdefault(provider, ProviderHealth())
                self._models[role] = get_model(
                    self.config,
                    role,
                    sink=self.sink,
                    run_id=self.run_id,
                    budget=self.budget,
                    health=health,
                )
            return self._models[role]

    def made(self) -> tuple[CallRecord, ...]:
        """Every call this run made through a recorder, failed ones and those of failed work included:
        what its content's landings did not take lands with the run's final row (nothing spent goes
        unrecorded)."""
        return _stamped(tuple(self._made.records), self.warehouse)


# Context variables, not module globals: a Prefect task thread and a step pool's thread run in a copy of
# the submitting context, so each run (two in one process, a test beside another) sees its own.
_current: ContextVar[Runtime | None] = ContextVar("clonemem_runtime", default=None)
_budget: ContextVar[Budget | None] = ContextVar(
    "clonemem_budget", default=None
)  # shared by runs inside `spending`


@contextmanager
def spending(limit_usd: float | None) -> Iterator[Budget | None]:
    """One cost budget for every run started inside (the pipeline's subflows share it)."""
    budget = Budget(limit_usd) if limit_usd else _budget.get()
    token = _budget.set(budget)
    try:
        yield budget
    finally:
        _budget.reset(token)


@contextmanager
def use(runtime: Runtime) -> Iterator[Runtime]:
    token = _current.set(runtime)
    try:
        yield runtime
    finally:
        _current.reset(token)


def current() -> Runtime:
    runtime = _current.get()
    if runtime is None:
        raise RuntimeError("no run context: call tasks inside clonemem.runtime.use(...)")
    return runtime


class _Both:
    """Records a call in two sinks: the recorder's (its task's result) and the run's (:meth:`Runtime.made`)."""

    def __init__(self, first: CallSink, second: CallSink) -> None:
        self.first, self.second = first, second

    def record(self, rec: CallRecord) -> None:
        self.first.record(rec)
        self.second.record(rec)


class Recorder:
    """The models of the current run, with every call recorded here: a task returns its result with
    the calls that produced it (:class:`Paid`), so both land (and are cached) together. ``covers``
    (stage name -> role) limits its models to the stages the task's cache key covers."""

    def __init__(self, runtime: Runtime, covers: Mapping[str, str] | None = None) -> None:
        self._runtime = runtime
        self._sink = MemorySink()
        self._both = _Both(self._sink, runtime._made)
        self._covers = covers

    def model(self, role: Role) -> Model:
        return self._runtime.model(role).recording_to(self._both, self._covers)

    def run(self, stage: Stage[In, Out], inp: In) -> Out:
        """Run ``stage`` through its role's model, recording the calls here."""
        return stage.run(self.model(stage.role), inp)

    @property
    def calls(self) -> tuple:
        return tuple(self._sink.records)


def paid(body: Callable[[Recorder], T], *, covers: Mapping[str, str] | None) -> Paid[T]:
    """Run ``body`` with a recorder of the current run; a failure carries the calls it spent (``exc.calls``).

    ``covers`` is what the calling task's cache key covers (``clonemem.tasks.caching.covered_stages()``;
    None only where nothing is cached): a stage call outside it raises ``StageNotCovered``."""
    rt = current()
    rt.start()
    rec = Recorder(rt, covers)
    try:
        return Paid(body(rec), _stamped(rec.calls, rt.warehouse))
    except Exception as exc:
        # any exception may carry them: an attribute set on the instance, which Exception does not declare
        exc.calls = _stamped(rec.calls, rt.warehouse)  # type: ignore[attr-defined]  # the failure carries the calls it spent to its landing
        raise


class StageFailed(LLMError):
    """Most LLM calls of one stage failed: the run fails rather than land what little got through."""


MOSTLY_FAILED_MIN_CALLS = (
    5  # below this a stage's share says little (one persona's stage I is one call)
)


def require_mostly_ok(
    calls: Iterable[CallRecord], min_calls: int = MOSTLY_FAILED_MIN_CALLS
) -> None:
    """Raise :class:`StageFailed` for the first stage (by name) where more than half of at least
    ``min_calls`` calls failed, naming the role, the model and the first error."""
    by_stage: dict[str, list[CallRecord]] = {}
    for call in calls:
        by_stage.setdefault(call.stage, []).append(call)
    for stage, made in sorted(by_stage.items()):
        failed = [c for c in made if c.outcome != "ok"]
        if len(made) >= min_calls and 2 * len(failed) > len(made):
            first = failed[0]
            raise StageFailed(
                f"stage {stage}: {len(failed)} of {len(made)} LLM calls failed ({first.role} "
                f"{first.provider}/{first.model}): {first.error or first.outcome}"
            )


def _stamped(calls: tuple, warehouse: str | None) -> tuple:
    for call in calls:
        call.warehouse = warehouse
    return calls


class StepPool:
    """Threads running steps, each in a copy of the submitting thread's context (a Prefect flow's run
    context and settings, and this module's run context, reach the steps as they reach its tasks)."""

    def __init__(self, pool: ThreadPoolExecutor) -> None:
        self._pool = pool

    def submit(self, fn: Callable[..., T], *args: Any) -> Future[T]:
        return self._pool.submit(contextvars.copy_context().run, fn, *args)


@contextmanager
def step_pool(workers: int) -> Iterator[StepPool]:
    """A :class:`StepPool` of ``workers`` threads; leaving it on an error starts no queued step."""
    pool = ThreadPoolExecutor(workers, thread_name_prefix="clonemem-step")
    try:
        yield StepPool(pool)
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
