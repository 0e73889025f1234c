"""The Typer application, its global options and the warehouse hold every writing command takes.

Prefect reads its settings (and sets up logging) when it is imported, and the allocators must be tuned
before any thread starts or DuckDB or polars loads: both happen here, first, before any command module
is imported (`clonemem/cli/__init__.py` imports this module first).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Annotated

import typer

from clonemem import settings
from clonemem.allocator import tune as _tune_allocators
from clonemem.prefect_env import configure as _configure_prefect

_configure_prefect(debug="--debug" in sys.argv[1:])
_tune_allocators()

app = typer.Typer(
    name="clonemem",
    help="CloneMem benchmark pipeline: generate, gate and evaluate long-term-memory benchmarks "
    "for AI clones.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


class State:
    """The global options of this invocation (set by :func:`main_options` before a command runs)."""

    warehouse: Path = Path(settings.DEFAULT_WAREHOUSE)
    flag: Path | None = None  # --warehouse (or $CLONEMEM_WAREHOUSE, which typer reads into it)
    debug: bool = False
    wait: float | None = (
        None  # --wait: seconds a writer waits for another writer (None: the default)
    )
    command: str | None = (
        None  # "clonemem generate": what the writer lock's file calls this process
    )


@app.callback()
def main_options(
    ctx: typer.Context,
    warehouse: Annotated[
        Path | None,
        typer.Option(
            "--warehouse",
            envvar=settings.WAREHOUSE,
            help="DuckDB warehouse file [default: ./clonemem.duckdb]",
        ),
    ] = None,
    debug: Annotated[
        bool, typer.Option("--debug", help="show tracebacks and Prefect's logs")
    ] = False,
    wait: Annotated[
        float | None,
        typer.Option(
            "--wait",
            envvar=settings.LOCK_WAIT,
            min=0,
            help="seconds a write waits while another process writes the warehouse [default: 600]",
        ),
    ] = None,
) -> None:
    State.flag = warehouse
    State.warehouse = settings.warehouse(warehouse)
    State.debug = debug
    State.wait = wait
    State.command = f"clonemem {ctx.invoked_subcommand}" if ctx.invoked_subcommand else None


def warehouse_for(config_warehouse: Path | None) -> Path:
    """The warehouse a config-driven command writes: --warehouse / $CLONEMEM_WAREHOUSE beat the config's."""
    return settings.warehouse(State.flag, config_warehouse)


def resolved_warehouse() -> Path:
    return State.warehouse.expanduser().resolve()


@contextmanager
def writing(warehouse: Path, *, runs_flows: bool = True) -> Iterator[None]:
    """Hold the warehouse's writer lock for a whole command (the stages it runs join this hold).

    Every command that writes runs flows, so this is also where the ephemeral Prefect server is
    tied to this process's life."""
    from clonemem import interrupts
    from clonemem.prefect_env import die_with_parent_server, on_temporary_server
    from clonemem.warehouse.lock import writer_lock  # lazy: the warehouse package loads DuckDB

    interrupts.note_writes()
    if runs_flows:
        die_with_parent_server()
    path = warehouse.expanduser().resolve()
    # only a command that runs flows loads Prefect's settings
    flows = on_temporary_server() if runs_flows else nullcontext()
    with (
        interrupts.last_words(lambda: end_own_runs(path)),
        writer_lock(path, wait_s=State.wait, command=State.command),
        flows,
    ):
        yield


def end_own_runs(path: Path) -> None:
    """On the way out after Ctrl-C: every run row this process still has ``running`` ends ``interrupted``
    (a stage's flow in another thread never saw the KeyboardInterrupt; the main thread may not have
    unwound to its own run's handler before the process leaves)."""
    from clonemem.warehouse import Warehouse
    from clonemem.warehouse.runs import interrupt_own_runs

    if path.exists():
        with Warehouse.open_writer(path, wait_s=1.0) as wh:
            interrupt_own_runs(wh, "KeyboardInterrupt")
