"""The errors that are the user's to fix (printed as one line, no traceback) and the exit codes.

Exit codes (documented in the README):

====  ==========================================================================================
0     success
1     an error the message explains (bad input or config, unknown benchmark, refused SQL, ...)
2     wrong command-line usage
3     the gate failed: the benchmark is stored with gate status ``failed``
4     generation produced no persona (nothing to gate or evaluate)
5     evaluation: at least one requested memory system failed to evaluate
6     stopped at the cost budget (``--max-cost``): finished work is landed or cached; re-run to resume
75    the warehouse is being written by another process and did not become free in time
130   interrupted (Ctrl-C)
====  ==========================================================================================
"""

from __future__ import annotations

from enum import IntEnum


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


def user_errors() -> tuple[type[BaseException], ...]:
    """Exception types whose message is the whole story (imported lazily: some pull in Prefect)."""
    import duckdb

    from clonemem.warehouse.catalog import EvaluationRefused
    from clonemem.llm.types import LLMError
    from clonemem.registry import RegistryError
    from clonemem.importers.base import ImportFailed as ReleaseError
    from clonemem.schemas.config import ConfigError
    from clonemem.warehouse.catalog import UnknownBenchmark
    from clonemem.warehouse.db import WarehouseError
    from clonemem.warehouse.guard import SqlRefused
    from clonemem.warehouse.migrate import MigrationError

    return (ConfigError, ReleaseError, UnknownBenchmark, SqlRefused, WarehouseError, MigrationError,
            LLMError, RegistryError, duckdb.Error, EvaluationRefused)


def exit_code_for(exc: BaseException) -> ExitCode:
    from clonemem.llm.types import BudgetExceeded
    from clonemem.warehouse.lock import WarehouseBusy

    if isinstance(exc, BudgetExceeded):
        return ExitCode.BUDGET
    return ExitCode.BUSY if isinstance(exc, WarehouseBusy) else ExitCode.ERROR


def one_line(exc: BaseException) -> str:
    """The first line of an error's message (DuckDB and pydantic messages run over several)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
