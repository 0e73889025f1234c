"""glibc's allocator, tuned for a threaded Python process (measured in `benchmarks/evaluate_scale.py`).

glibc gives threads allocation arenas of their own, up to eight per core, and memory freed in an arena stays
with that process; Prefect runs tasks on worker threads, so an evaluation's memory was spread over many
arenas. Two arenas held about 40 MB less at the first evaluation's peak, at no measured cost in time.
Nothing here applies where the C library is not glibc, or where ``MALLOC_ARENA_MAX`` already says otherwise.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

M_ARENA_MAX = -8  # mallopt's parameter number, from glibc's <malloc.h>
ARENAS = 2


def _glibc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc if hasattr(libc, "mallopt") else None
    except OSError:
        return None


def cap_arenas() -> None:
    """At most :data:`ARENAS` arenas: call before any thread starts (arenas are shared out on first use)."""
    libc = _glibc()
    if libc is not None and "MALLOC_ARENA_MAX" not in os.environ:
        libc.mallopt(M_ARENA_MAX, ARENAS)

