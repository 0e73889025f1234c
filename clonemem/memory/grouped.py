"""What the consolidating systems (Mem0, A-Mem, O-Mem) share in their build: a persona's traces in time
order, cut into groups of consecutive traces (one calendar day's, at most ``group_size``), each group
shown to an LLM step in one call under short ids (``t0``, ``t1``, ...) and the per-trace replies matched
back by those ids; every call goes through ``ctx.llm``, is counted, and its reply is the stage's model.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import numpy as np
from pydantic import BaseModel

from clonemem.memory.base import BuildContext, MemorySystem, MemoryTrace
from clonemem.schemas.memsys import TraceView

if TYPE_CHECKING:
    from clonemem.stages import Stage

GROUP_SIZE = 8  # traces per LLM call (one session's or one day's consecutive traces)

Out = TypeVar("Out", bound=BaseModel)


def when(t: dt.datetime) -> np.datetime64:
    """A timestamp as numpy microseconds (aware times are taken in UTC, as the warehouse stores them)."""
    if t.tzinfo is not None:
        t = t.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return np.datetime64(t, "us")


def in_order(traces: Sequence[MemoryTrace]) -> list[MemoryTrace]:
    return sorted(traces, key=lambda t: (when(t.event_date), t.trace_id))


def groups(traces: Sequence[MemoryTrace], size: int = GROUP_SIZE) -> list[range]:
    """Consecutive traces (already in time order) of one calendar day, at most ``size`` per group."""
    out: list[range] = []
    start = 0
    for i in range(1, len(traces) + 1):
        if (
            i == len(traces)
            or i - start >= size
            or traces[i].event_date.date() != traces[start].event_date.date()
        ):
            out.append(range(start, i))
            start = i
    return out


def view(t: MemoryTrace, short_id: str) -> TraceView:
    return TraceView(
        id=short_id, medium=t.medium, event_date=t.event_date.isoformat(), content=t.content
    )


def group_views(traces: Sequence[MemoryTrace], part: range) -> list[TraceView]:
    """A group's traces as the model sees them, under short ids ``t0``, ``t1``, ... (place in the group)."""
    return [view(traces[i], f"t{j}") for j, i in enumerate(part)]


class _Reply(Protocol):
    @property
    def id(self) -> str: ...  # read-only: the replies are pydantic models


R = TypeVar("R", bound=_Reply)


def in_group_order(replies: Iterable[R], part: range) -> list[R | None]:
    """Per-trace replies matched to the group by their short ids, in the group's order; None where the
    reply skipped a trace."""
    by_id = {r.id: r for r in replies}
    return [by_id.get(f"t{j}") for j in range(len(part))]


class GroupedMemory(MemorySystem):
    """A system built by LLM steps over groups of consecutive traces. ``build`` starts with
    :meth:`_start` (the traces in time order as ``self.traces``, the call count at zero, the groups) and
    makes each call with :meth:`_step`; ``self.calls`` is what it reports as ``llm_calls``."""

    group_size: int = GROUP_SIZE
    traces: list[MemoryTrace]
    calls: int

    def _start(self, traces: Sequence[MemoryTrace]) -> list[range]:
        self.traces = in_order(traces)
        self.calls = 0
        return groups(self.traces, self.group_size)

    def _through(self, parts: list[range], ctx: BuildContext, phase: str) -> Iterator[range]:
        """``parts`` in order, telling ``ctx.progress`` after each how many traces ``phase`` has been
        through (the evaluation logs it while a slow build runs)."""
        for part in parts:
            yield part
            ctx.progress(phase, part.stop, len(self.traces))

    def _views(self, part: range) -> list[TraceView]:
        return group_views(self.traces, part)

    def _step(self, ctx: BuildContext, stage: Stage[Any, Out], inp: BaseModel) -> Out:
        """One LLM call of the build (``ctx.llm`` runs only the system's declared stages), counted."""
        out = ctx.llm(stage.name, inp)
        self.calls += 1
        assert isinstance(out, stage.output)
        return out
