"""The errors that are the user's to fix (printed as one line, no traceback) and the exit codes.

Exit codes (documented in the README):

====  ==========================================================================================
0     success
1     an error the message explains (bad input or config, unknown benchmark, refused SQL, ...)
2     wrong command-line usage
3     the gate failed: the benchmark is stored with gate status ``failed``
4     generation produced no persona (nothing to gate or evaluate)
5     a named memory system failed (``MemorySystemFailed``: its build, retrieval or stored memory)
6     stopped at the cost budget (``--max-cost``): finished work is landed or cached; re-run to resume
75    the warehouse is being written by another process and did not become free in time
130   interrupted (Ctrl-C): finished work is landed or cached; re-run to resume
====  ==========================================================================================
"""

from __future__ import annotations

from enum import IntEnum
from typing import ClassVar


class ExitCode(IntEnum):
    OK = 0
    ERROR = 1
    USAGE = 2
    GATE_FAILED = 3
    NOTHING_GENERATED = 4
    SYSTEMS_FAILED = 5
    BUDGET = 6
    BUSY = 75
    INTERRUPTED = 130


class UserError(Exception):
    """An error that is the user's to fix, whose message is the whole story: printed as one line, no
    traceback. Its class says its exit code (1 unless it overrides ``exit_code``). The project's error
    types derive from it where they are defined, so this module imports none of them."""

    exit_code: ClassVar[ExitCode] = ExitCode.ERROR


def user_errors() -> tuple[type[BaseException], ...]:
    """Exception types whose message is the whole story."""
    import duckdb

    return (UserError, duckdb.Error)


def exit_code_for(exc: BaseException) -> ExitCode:
    """The exit code of an error (``exc`` as :func:`significant` found it): 5 means a named memory
    system failed and nothing else; 6 the cost budget; 75 a busy warehouse; 1 the rest."""
    return exc.exit_code if isinstance(exc, UserError) else ExitCode.ERROR


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc``, then what it wraps, breadth first: causes, contexts and the members of exception groups
    (Prefect and anyio re-raise a task's error wrapped, or inside a group)."""
    seen: list[BaseException] = []
    queue = [exc]
    while queue:
        cur = queue.pop(0)
        if any(cur is s for s in seen):
            continue
        seen.append(cur)
        queue += [e for e in (cur.__cause__, cur.__context__) if e is not None]
        queue += list(getattr(cur, "exceptions", ()) if isinstance(cur, BaseExceptionGroup) else ())
    return seen


def significant(exc: BaseException) -> BaseException:
    """The error that decides the exit code: the first memory-system failure, budget stop or busy
    warehouse found in ``exc``'s chain, else ``exc`` itself."""
    chain = _chain(exc)
    for code in (ExitCode.BUDGET, ExitCode.SYSTEMS_FAILED, ExitCode.BUSY):
        for e in chain:
            if exit_code_for(e) == code:
                return e
    return exc


def unreachable_prefect_api(exc: BaseException) -> str | None:
    """The Prefect API's URL when ``exc`` says it cannot be reached (Prefect's own "Failed to reach API
    at URL", or a refused connection to it), else None."""
    import re

    for e in _chain(exc):
        found = re.search(r"Failed to reach API at (\S+?)\.?$", str(e).strip())
        if isinstance(e, RuntimeError) and found:
            return found.group(1)
    url = prefect_api_url()
    for e in _chain(exc):
        if type(e).__name__ in {"ConnectError", "ConnectTimeout"} and type(e).__module__.startswith("httpx"):
            try:
                target = str(e.request.url)  # type: ignore[attr-defined]  # httpx errors carry the request; checked by the except
            except (AttributeError, RuntimeError):  # no request attached: not attributable
                continue
            if url and target.startswith(url.rstrip("/")):
                return url
    return None


def prefect_api_url() -> str | None:
    """The API this process talks to: ``PREFECT_API_URL``, else the temporary server it started."""
    import os
    import sys

    if os.environ.get("PREFECT_API_URL"):
        return os.environ["PREFECT_API_URL"]
    from clonemem.prefect_env import temporary_server_url

    if temporary_server_url():
        return temporary_server_url()
    server = sys.modules.get("prefect.server.api.server")
    for instance in getattr(getattr(server, "SubprocessASGIServer", None), "_instances", {}).values():
        return str(instance.api_url)
    return None


def one_line(exc: BaseException) -> str:
    """The first line of an error's message (DuckDB and pydantic messages run over several)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
