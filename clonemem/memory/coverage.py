"""Write coverage: which traces a memory system's stored memory represents, with provenance.

A trace is represented at a time when some item the system stores then (``MemorySystem.stored``)
names it among the traces it came from. Raw retrievers represent every trace they index; a
consolidating system can drop a trace's content (a fact judged a duplicate, a deleted memory, a
statement never extracted), and that is a write failure for any question whose evidence it is.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from clonemem.memory.base import MemorySystem, MemoryTrace


def represented(system: MemorySystem, as_of: dt.datetime | None = None) -> set[str]:
    """The trace ids in the provenance of the items stored at ``as_of`` (None: at the end)."""
    return {t for item in system.stored(as_of) for t in item.trace_ids}


def write_coverage(
    system: MemorySystem, traces: Iterable[MemoryTrace | str], as_of: dt.datetime | None = None
) -> float:
    """Share of ``traces`` (records or ids; with ``as_of``, pass those dated at or before it) that the
    system's stored memory represents at ``as_of`` (None: at the end of the build). Raises ValueError
    for no traces: the share is undefined."""
    ids = {t.trace_id if isinstance(t, MemoryTrace) else t for t in traces}
    if not ids:
        raise ValueError("write coverage of no traces is undefined")
    return len(ids & represented(system, as_of)) / len(ids)
