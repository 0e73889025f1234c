"""The run context shared by a flow's tasks: configuration, models, the call sink.

Prefect task parameters must be hashable inputs for caching, so live objects (clients, the
warehouse writer) travel here instead; what affects outputs (model ref, seed, template) is part of
each task's cache key through :class:`clonemem.tasks.caching.StagePolicy`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from clonemem.llm.model import CallSink, Model, get_model
from clonemem.schemas.config import Role, RunConfig


@dataclass
class Runtime:
    config: RunConfig
    sink: CallSink | None = None
    run_id: str | None = None
    _models: dict[str, Model] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def model(self, role: Role) -> Model:
        with self._lock:
            if role not in self._models:
                self._models[role] = get_model(self.config, role, sink=self.sink, run_id=self.run_id)
            return self._models[role]

    def usage(self) -> dict[str, dict[str, float]]:
        with self._lock:
            return {role: m.usage.__dict__.copy() for role, m in self._models.items()}


_current: Runtime | None = None


@contextmanager
def use(runtime: Runtime) -> Iterator[Runtime]:
    global _current
    saved, _current = _current, runtime
    try:
        yield runtime
    finally:
        _current = saved


def current() -> Runtime:
    if _current is None:
        raise RuntimeError("no run context: call tasks inside clonemem.runtime.use(...)")
    return _current
