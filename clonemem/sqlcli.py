"""Read-only ad-hoc SQL for `clonemem sql`: statement-type check, then a read-only connection."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
from dataclasses import dataclass

import duckdb

from clonemem.warehouse import Warehouse

ALLOWED = {"SELECT", "EXPLAIN", "PRAGMA", "CALL"}
MAX_CELL = 80


class ReadOnlyViolation(ValueError):
    pass


@dataclass(frozen=True)
class Result:
    columns: list[str]
    rows: list[tuple]


def check_read_only(query: str) -> None:
    """Refuse anything but queries before touching the warehouse (the read-only connection is a second guard)."""
    try:
        statements = duckdb.connect(":memory:").extract_statements(query)
    except duckdb.ParserException as exc:
        raise ReadOnlyViolation(f"cannot parse the query: {exc}") from None
    if not statements:
        raise ReadOnlyViolation("empty query")
    for stmt in statements:
        kind = stmt.type.name
        if kind not in ALLOWED:
            raise ReadOnlyViolation(
                f"`clonemem sql` is read-only: {kind} statements are refused "
                "(the warehouse changes only through the pipeline's commands)"
            )


def run(wh: Warehouse, query: str) -> list[Result]:
    check_read_only(query)
    results = []
    for stmt in wh.con.extract_statements(query):
        cur = wh.con.execute(stmt)
        columns = [d[0] for d in cur.description] if cur.description else []
        results.append(Result(columns, cur.fetchall() if columns else []))
    return results


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
    out.append(f"({len(result.rows)} row{'s' if len(result.rows) != 1 else ''})")
    return "\n".join(out)


def format_csv(result: Result) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(result.columns)
    writer.writerows(result.rows)
    return buf.getvalue().rstrip("\n")


def format_json(result: Result) -> str:
    return json.dumps([dict(zip(result.columns, row)) for row in result.rows], default=str, ensure_ascii=False)


FORMATS = {"table": format_table, "csv": format_csv, "json": format_json}
