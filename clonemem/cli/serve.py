"""`serve-memory` and `dashboard`: the two servers the command line starts."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from clonemem.cli.app import State, app
from clonemem.cli.exit import fail, handles_errors


@app.command("serve-memory")
@handles_errors
def serve_memory(
    system: Annotated[
        str, typer.Argument(help="a registered memory system (see `clonemem systems`)")
    ],
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="port on 127.0.0.1 (0: a free one)")
    ] = 8765,
    config: Annotated[
        Path | None,
        typer.Option("--config", help="run configuration (the extractor's model, seed)"),
    ] = None,
    log: Annotated[
        Path | None,
        typer.Option("--log", help="append one JSON line per query: what the persona held"),
    ] = None,
) -> None:
    """Serve a memory system over the memory protocol (docs/memory-protocol.md) until Ctrl-C."""
    from clonemem.memory.serve import make_server, service_for
    from clonemem.schemas.config import load_config

    service = service_for(system, load_config(config), log)
    try:
        server = make_server(service, port)
    except OSError as exc:
        fail(f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}")
    host, bound = server.server_address[:2]
    typer.echo(
        f"serving {system} as {service.info.name} {service.info.version} at "
        f"http://{host!s}:{bound} (Ctrl-C stops)"
    )
    sys.stdout.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


@app.command("dashboard")
@handles_errors
def dashboard(
    warehouse: Annotated[
        Path | None,
        typer.Option("--warehouse", help="DuckDB warehouse file (overrides the global option)"),
    ] = None,
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="port on 127.0.0.1")] = 8501,
) -> None:
    """Start the read-only run-quality dashboard (Streamlit on 127.0.0.1; Ctrl-C stops it)."""
    from clonemem.dashboard import command

    path = (warehouse or State.warehouse).expanduser().resolve()
    if not path.is_file():
        typer.echo(
            f"note: no warehouse at {path} yet; the dashboard says so until one is created",
            err=True,
        )
    typer.echo(f"dashboard: http://127.0.0.1:{port} (read-only over {path})", err=True)
    argv = command(path, port, sys.executable)
    sys.stderr.flush()
    os.execv(
        argv[0], argv
    )  # the server takes this process's place: its pid, its signals, its exit code
