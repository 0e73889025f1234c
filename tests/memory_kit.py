"""Hand-written traces for the memory-system tests: one writer's view on remote work changing over a
spring, with a chat about something else in between."""

from __future__ import annotations

import datetime as dt

from clonemem.memory.base import MemoryTrace


def day(s: str) -> dt.datetime:
    return dt.datetime.fromisoformat(s)


def trace(tid: str, date: str, content: str, medium: str = "diary") -> MemoryTrace:
    return MemoryTrace(trace_id=tid, medium=medium, event_date=day(date), content=content)


REMOTE = [
    trace("r1", "2023-01-10T09:00:00", "I think remote work makes me more productive."),
    trace(
        "c1",
        "2023-01-20T18:00:00",
        "Me: I adopted a grey cat called Pixel.\nAna: So cute!",
        "chat_private",
    ),
    trace("r2", "2023-02-10T09:00:00", "Long week. I think remote work makes me more productive."),
    trace(
        "r3",
        "2023-03-10T12:00:00",
        "Me: I think remote work makes me more productive and calmer.\nAna: Nice.",
        "chat_private",
    ),
    trace(
        "r4",
        "2023-05-10T21:00:00",
        "Honestly, I no longer think remote work makes me more productive.",
    ),
]
