"""The process's memory allocators, tuned for the command line (measured in `benchmarks/evaluate_scale.py`).

Three allocators share a `clonemem` process and none can reuse what another freed: glibc's (Python),
DuckDB's jemalloc and polars' jemalloc. glibc gives threads allocation arenas of their own, up to eight
per core, and memory freed in an arena stays with it; Prefect runs tasks on worker threads, so an
evaluation's memory was spread over many arenas: two arenas held about 40 MB less at the first
evaluation's peak. jemalloc keeps freed pages for seconds before returning them; DuckDB's and polars'
returning them at once held about 20 MB less. Neither cost measurable time. A setting the environment
already gives (``MALLOC_ARENA_MAX``, ``DUCKDB_JE_MALLOC_CONF``, ``_RJEM_MALLOC_CONF``) is left alone.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

M_ARENA_MAX = -8  # mallopt's parameter number, from glibc's <malloc.h>
ARENAS = 2
# jemalloc's options for DuckDB's and polars' copies (each reads its own variable when it starts)
RETURN_AT_ONCE = "dirty_decay_ms:0,muzzy_decay_ms:0"
JEMALLOC_VARIABLES = ("DUCKDB_JE_MALLOC_CONF", "_RJEM_MALLOC_CONF")


def _glibc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc if hasattr(libc, "mallopt") else None
    except OSError:
        return None


def tune() -> None:
    """Call first, before any thread starts (glibc shares arenas out on first use) and before DuckDB or
    polars is imported (their jemalloc reads its variable once)."""
    libc = _glibc()
    if libc is not None and "MALLOC_ARENA_MAX" not in os.environ:
        libc.mallopt(M_ARENA_MAX, ARENAS)
    for name in JEMALLOC_VARIABLES:
        os.environ.setdefault(name, RETURN_AT_ONCE)
