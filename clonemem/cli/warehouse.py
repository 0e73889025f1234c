"""`sql`, `benchmarks` and `drop`: reading and tidying the warehouse."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from clonemem.cli.app import State, app, writing
from clonemem.cli.exit import handles_errors, usage


@app.command("sql")
@handles_errors
def sql(
    query: Annotated[str, typer.Argument(help="SQL query (read-only)")],
    fmt: Annotated[str, typer.Option("--format", help="table, csv or json")] = "table",
    max_rows: Annotated[
        int, typer.Option("--max-rows", min=1, help="cut each result at this many rows")
    ] = 10_000,
    timeout: Annotated[
        float, typer.Option("--timeout", min=0.001, help="stop a query after this many seconds")
    ] = 30.0,
    memory_limit: Annotated[
        str | None,
        typer.Option(
            "--memory-limit",
            help="memory a query may use, e.g. 512MB [default: $CLONEMEM_SQL_MEMORY_LIMIT or 1GB]",
        ),
    ] = None,
    temp_limit: Annotated[
        str | None,
        typer.Option(
            "--temp-limit",
            help="disk a query may spill to, e.g. 2GB [default: $CLONEMEM_SQL_TEMP_LIMIT or 1GB]",
        ),
    ] = None,
) -> None:
    """Run read-only ad-hoc SQL over the warehouse (no writes, no files, no network, no settings)."""
    from clonemem import sqlcli

    if fmt not in sqlcli.FORMATS:
        usage(f"--format must be one of {', '.join(sqlcli.FORMATS)}")
    sqlcli.check_read_only(query)
    for result in sqlcli.run(
        State.warehouse,
        query,
        max_rows=max_rows,
        timeout_s=timeout,
        memory_limit=memory_limit,
        temp_limit=temp_limit,
    ):
        typer.echo(sqlcli.FORMATS[fmt](result))
        if result.truncated and fmt != "table":
            typer.echo(f"note: result cut at {max_rows} rows (--max-rows)", err=True)


@app.command("benchmarks")
@handles_errors
def benchmarks(
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
    show_all: Annotated[
        bool,
        typer.Option(
            "--all", help="also list incomplete benchmarks (still landing, or interrupted)"
        ),
    ] = False,
) -> None:
    """List the complete benchmarks in the warehouse (--all: incomplete ones too)."""
    from clonemem.warehouse import Warehouse

    keys = ["id", "name", "source", "gate_status", "personas", "traces", "questions", "status"]
    with Warehouse.open_reader(State.warehouse) as wh:
        where = "" if show_all else "WHERE status = 'complete' "
        rows = wh.rows(f"SELECT {', '.join(keys)} FROM v_benchmarks {where}ORDER BY name")
    items = [dict(zip(keys, r, strict=True)) for r in rows]
    if as_json:
        typer.echo(json.dumps(items))
        return
    for it in items:
        flag = (
            ""
            if it["status"] == "complete"
            else "  INCOMPLETE (re-run to resume, or `clonemem drop`)"
        )
        typer.echo(
            f"{it['name']}  [{it['source']}, gate {it['gate_status']}]  personas {it['personas']}, "
            f"traces {it['traces']}, questions {it['questions']}  id {it['id']}{flag}"
        )


@app.command("drop")
@handles_errors
def drop(benchmark: Annotated[str, typer.Argument(help="benchmark id or name")]) -> None:
    """Remove a benchmark and everything that belongs to it, in one transaction."""
    from clonemem.warehouse import Warehouse
    from clonemem.warehouse.catalog import resolve_benchmark
    from clonemem.warehouse.lifecycle import drop_benchmark

    with (
        writing(State.warehouse, runs_flows=False),
        Warehouse.open_writer(State.warehouse, wait_s=State.wait) as wh,
    ):
        bid, name = resolve_benchmark(wh, benchmark)
        removed = drop_benchmark(wh, bid)
    typer.echo(
        f"dropped benchmark {name!r} ({bid}): {sum(removed.values())} rows from {len(removed)} tables"
    )
