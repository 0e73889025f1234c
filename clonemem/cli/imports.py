"""`import`, its earlier names `import-release` and `import-locomo`, and `export-release`."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer

from clonemem.cli import render
from clonemem.cli.app import State, app
from clonemem.cli.exit import handles_errors, usage
from clonemem.cli.options import import_mode
from clonemem.cli.options import name as checked_name

Name = Annotated[str, typer.Option("--name", help="benchmark name")]
Replace = Annotated[
    bool,
    typer.Option("--replace", help="replace an existing benchmark of that name (atomically)"),
]
Append = Annotated[
    bool, typer.Option("--append", help="add these personas to an existing benchmark")
]


@app.command("import")
@handles_errors
def import_cmd(
    format_name: Annotated[
        str,
        typer.Argument(
            metavar="FORMAT",
            help="source format: release, locomo, longmemeval, personamem, or one a plugin "
            "registers (clonemem.importers)",
        ),
    ],
    paths: Annotated[
        list[Path], typer.Argument(help="files or folders (every file of the format, recursively)")
    ],
    name: Name,
    replace: Replace = False,
    append: Append = False,
) -> None:
    """Load files of a registered format as a benchmark (all files or nothing), through the import flow."""
    run_import(format_name, paths, name, replace, append)


@app.command("import-release")
@handles_errors
def import_release(
    paths: Annotated[
        list[Path],
        typer.Argument(help="CloneMem release JSON files or folders (every *.json, recursively)"),
    ],
    name: Name,
    replace: Replace = False,
    append: Append = False,
) -> None:
    """Deprecated: the earlier name of `import release`."""
    render.err("note: `clonemem import-release` is deprecated; use `clonemem import release`")
    run_import("release", paths, name, replace, append)


@app.command("import-locomo")
@handles_errors
def import_locomo(
    paths: Annotated[
        list[Path],
        typer.Argument(help="LoCoMo files (one conversation each, or locomo10.json) or folders"),
    ],
    name: Name,
    replace: Replace = False,
    append: Append = False,
) -> None:
    """Deprecated: the earlier name of `import locomo`."""
    render.err("note: `clonemem import-locomo` is deprecated; use `clonemem import locomo`")
    run_import("locomo", paths, name, replace, append)


def run_import(format_name: str, paths: list[Path], name: str, replace: bool, append: bool) -> None:
    """Every import command: check the request, then run the import flow (the deployment's path too).

    The writer lock is not held around the flow: files are parsed before the warehouse is touched, so
    a bad file leaves no warehouse (nor lock file) behind; the landing task waits for the lock itself.
    """
    from clonemem.importers import importer

    name = checked_name(name, "--name")  # one line naming the flag, exit 2
    mode = import_mode(replace, append)
    importer(format_name)  # an unknown format fails here, before Prefect starts
    from clonemem.flows.imports import import_flow
    from clonemem.prefect_env import die_with_parent_server

    die_with_parent_server()
    warehouse = State.warehouse.expanduser().resolve()
    with prefect_quiet():
        summary = import_flow(
            format_name, [str(p) for p in paths], name, str(warehouse), mode, State.wait
        )
    render.import_summary(summary, State.warehouse)


@contextmanager
def prefect_quiet() -> Iterator[None]:
    """No log records while the import flow runs (unless --debug): a refused import is the task's
    failure, which Prefect logs with its traceback, and the CLI reports it itself, in one line."""
    if State.debug:
        yield
        return
    before = logging.root.manager.disable
    logging.disable(logging.ERROR)
    try:
        yield
    finally:
        logging.disable(before)


@app.command("export-release")
@handles_errors
def export_release(
    benchmark: Annotated[str, typer.Argument(help="benchmark id or name")],
    out: Annotated[Path, typer.Option("--out", help="output folder")],
    questions_key: Annotated[
        str,
        typer.Option(
            "--questions-key",
            help="top-level key of the question list: questions (documented) or qa_items "
            "(as published)",
        ),
    ] = "questions",
) -> None:
    """Write a benchmark in the CloneMem release format, one JSON file per persona."""
    from clonemem.exporters.release import export_release as export
    from clonemem.schemas.release import QUESTION_KEYS
    from clonemem.warehouse import Warehouse

    if questions_key not in QUESTION_KEYS:
        usage(f"--questions-key must be one of {', '.join(QUESTION_KEYS)}, got {questions_key!r}")
    with Warehouse.open_reader(State.warehouse) as wh:
        written = export(wh, benchmark, out, questions_key)
    for path in written:
        typer.echo(str(path))
