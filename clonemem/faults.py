"""Deterministic fault injection for tests: kill the process at a named point.

Code that lands or commits work calls ``checkpoint("name")`` at the places where a crash matters
(after a persona landed, after a stage result was written ...). With
``CLONEMEM_FAULT_KILL_AT="name:N"`` (several separated by commas) the process SIGKILLs itself the
N-th time it passes ``name`` — a crash at a known point, instead of a test racing a timer.
Without the variable a checkpoint costs one dict lookup.
"""

from __future__ import annotations

import os
import signal
import threading

from clonemem import settings

ENV = settings.FAULT_KILL_AT

_counts: dict[str, int] = {}
_lock = threading.Lock()


def _plan() -> dict[str, int]:
    plan: dict[str, int] = {}
    for part in filter(
        None, (p.strip() for p in (settings.current().fault_kill_at or "").split(","))
    ):
        name, _, nth = part.rpartition(":")
        if not name or not nth.isdigit() or int(nth) < 1:
            raise ValueError(f"${ENV}: {part!r} is not NAME:N with N >= 1")
        plan[name] = int(nth)
    return plan


def checkpoint(name: str) -> None:
    """Count a pass through ``name``; SIGKILL this process on the planned pass."""
    if settings.current().fault_kill_at is None:
        return
    nth = _plan().get(name)
    if nth is None:
        return
    with _lock:
        _counts[name] = _counts.get(name, 0) + 1
        hit = _counts[name] == nth
    if hit:
        os.kill(os.getpid(), signal.SIGKILL)
