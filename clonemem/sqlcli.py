"""`clonemem sql`: ad-hoc queries through the guarded connection (:mod:`clonemem.warehouse.guard`), and
the output formats."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
from pathlib import Path

from clonemem.warehouse import Warehouse
from clonemem.warehouse.guard import (
    DEFAULT_MAX_ROWS,
    DEFAULT_TIMEOUT_S,
    check_statements,
    open_guarded,
)
from clonemem.warehouse.guard import QueryResult as Result

MAX_CELL = 80


def check_read_only(query: str) -> None:
    """Refuse anything but queries before touching the warehouse (DuckDB's locked settings are the real guard)."""
    check_statements(query)


def run(
    source: Path | Warehouse,
    query: str,
    *,
    max_rows: int = DEFAULT_MAX_ROWS,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    memory_limit: str | None = None,
    temp_limit: str | None = None,
) -> list[Result]:
    """Run a query through the guarded connection on the warehouse at ``source`` (``memory_limit`` and
    ``temp_limit``: DuckDB sizes, None for ``$CLONEMEM_SQL_MEMORY_LIMIT``/``$CLONEMEM_SQL_TEMP_LIMIT`` or 1 GB).

    An open :class:`Warehouse` (the pipeline's own fixed queries, e.g. the demo's summary) is
    queried directly after the same statement check.
    """
    if isinstance(source, Warehouse):
        out = []
        for stmt in check_statements(query):
            cur = source.con.execute(stmt)
            columns = [d[0] for d in cur.description] if cur.description else []
            rows = cur.fetchmany(max_rows + 1) if columns else []
            out.append(Result(columns, rows[:max_rows], len(rows) > max_rows))
        return out
    from clonemem.interrupts import interrupting

    with (
        open_guarded(
            source,
            max_rows=max_rows,
            timeout_s=timeout_s,
            memory_limit=memory_limit,
            temp_limit=temp_limit,
        ) as con,
        interrupting(con.interrupt),
    ):
        return con.query(
            query
        )  # Ctrl-C stops the query at once (DuckDB would notice it only at the end)


def _cell(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    text = str(value).replace("\n", "\\n")
    return text if len(text) <= MAX_CELL else text[: MAX_CELL - 1] + "…"


def format_table(result: Result) -> str:
    cells = [[_cell(v) for v in row] for row in result.rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(result.columns)]
    line = lambda vals: " | ".join(v.ljust(w) for v, w in zip(vals, widths)).rstrip()  # noqa: E731
    out = [line(result.columns), "-+-".join("-" * w for w in widths)]
    out += [line(r) for r in cells]
    out.append(
        f"({len(result.rows)} row{'s' if len(result.rows) != 1 else ''}"
        f"{', cut at the row limit' if result.truncated else ''})"
    )
    return "\n".join(out)


def format_csv(result: Result) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(result.columns)
    writer.writerows(result.rows)
    return buf.getvalue().rstrip("\n")


def format_json(result: Result) -> str:
    return json.dumps(
        [dict(zip(result.columns, row)) for row in result.rows], default=str, ensure_ascii=False
    )


FORMATS = {"table": format_table, "csv": format_csv, "json": format_json}
