"""How the command line ends: one line per failure with its exit code, and the process's exit.

Every command is wrapped by :func:`handles_errors`; usage errors found by a command call :func:`fail`;
:func:`main` (the console script) runs the app and leaves through :func:`leave`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import wraps
from typing import NoReturn, ParamSpec, TypeVar

import typer

from clonemem import interrupts
from clonemem.cli.app import State, app
from clonemem.errors import (
    ExitCode,
    exit_code_for,
    one_line,
    significant,
    user_errors,
)
from clonemem.prefect_env import unreachable_prefect_api

P = ParamSpec("P")
R = TypeVar("R")


def fail(message: str, code: int = ExitCode.ERROR) -> NoReturn:
    """Print ``error: message`` on stderr and exit with ``code``."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(int(code))


def usage(message: str) -> NoReturn:
    """Wrong use of the command line (exit 2), found before anything runs."""
    fail(message, ExitCode.USAGE)


def handles_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Turn errors into one clear line and a non-zero exit; `--debug` keeps the traceback.

    The project's own errors carry the whole story; anything else is unexpected and says how to get
    the traceback.
    """

    @wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort, KeyboardInterrupt):
            raise
        except Exception as exc:
            if (
                interrupts.received()
            ):  # whatever Ctrl-C broke on its way out (a query, a connection)
                raise KeyboardInterrupt from exc
            if State.debug:
                raise
            report(exc)

    return wrapper


def report(exc: Exception) -> NoReturn:
    """The one line (and exit code) for an error that ended a command."""
    import duckdb  # lazy: DuckDB is not loaded by commands that never open a warehouse

    from clonemem.memory.errors import MemorySystemFailed

    if isinstance(exc, duckdb.Error):
        fail(one_line(exc))
    url = unreachable_prefect_api(exc)
    if url is not None:
        fail(
            f"cannot reach the Prefect API at {url}: start that Prefect server, or unset "
            "PREFECT_API_URL to run on a temporary local one"
        )
    cause = significant(exc)  # Prefect may re-raise a task's error wrapped
    if isinstance(cause, MemorySystemFailed):
        fail(
            f"{cause}; nothing was stored: fix the system, or leave it out of --systems, and run "
            "again",
            ExitCode.SYSTEMS_FAILED,
        )
    if isinstance(cause, user_errors()) or exit_code_for(cause) != ExitCode.ERROR:
        fail(str(cause), exit_code_for(cause))  # the project's messages: one line per problem
    fail(
        f"{type(cause).__name__}: {one_line(cause)} (unexpected; re-run with --debug for the "
        "traceback)"
    )


def main() -> None:
    """The console script: run the app, then leave with its exit code (130 after Ctrl-C)."""
    interrupts.install()
    try:
        app()
        code: object = 0
    except SystemExit as exc:
        code = exc.code
    except KeyboardInterrupt:  # pragma: no cover
        code = int(ExitCode.INTERRUPTED)
    if (
        interrupts.received()
    ):  # exit 130 now: no waiting for worker threads (see clonemem.interrupts)
        interrupts.leave()
    leave(code)


def leave(code: object) -> NoReturn:
    """Exit after the atexit hooks (Prefect stops its server, loggers flush), without interpreter teardown.

    duckdb 2.0's nanobind bindings print a "leaked instances" dump of 40-odd lines when objects of theirs
    (module-level type constants) are still referenced at teardown, which Prefect's and GX's background
    threads make happen in long runs. Every warehouse handle is closed before this point; the teardown
    would free nothing of ours, only print noise after the command's last line.
    """
    import atexit
    import os
    import threading

    interrupts.finishing()  # a Ctrl-C while threads drain: exit 130 at once, no traceback
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    # the interpreter's own order: threads' exit hooks (Prefect's log and event workers drain to the
    # API), then atexit (Prefect stops its temporary server), then teardown, which is what we skip
    threading._shutdown()  # type: ignore[attr-defined]  # private: the interpreter's own exit step, run early on purpose
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code or 0)
