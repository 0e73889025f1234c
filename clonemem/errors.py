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


def causes(exc: BaseException) -> list[BaseException]:
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
    chain = causes(exc)
    for code in (ExitCode.BUDGET, ExitCode.SYSTEMS_FAILED, ExitCode.BUSY):
        for e in chain:
            if exit_code_for(e) == code:
                return e
    return exc


def one_line(exc: BaseException) -> str:
    """The first line of an error's message (DuckDB and pydantic messages run over several)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
