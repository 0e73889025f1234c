"""A benchmark's lifecycle in the warehouse: `incomplete` while its stages land, `complete` after
the last one (see ``ddl/0009_benchmark_status.sql``), and removal in one transaction."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from clonemem.warehouse.content import delete_persona

if TYPE_CHECKING:
    from clonemem.warehouse.db import Warehouse

# Used inside the landing transactions, so a reader never sees new content under `complete`.
MARK_INCOMPLETE = (
    "UPDATE benchmarks SET gate_status = 'pending', status = 'incomplete' WHERE benchmark_id = ?"
)


def drop_benchmark(wh: Warehouse, benchmark_id: str) -> dict[str, int]:
    """Remove a benchmark and everything that belongs to it, in one transaction; returns rows per table.

    Tables are found by their key columns, so tables added later are covered too. `llm_calls` is
    the spend ledger (money that was spent) and stays.
    """
    tables = _base_tables(wh)
    removed: dict[str, int] = {}

    def delete(table: str, where: str, params: list) -> None:
        n = wh.scalar(f"DELETE FROM {table} WHERE {where}", params)
        if n:
            removed[table] = removed.get(table, 0) + n

    with wh.transaction():
        personas = [
            r[0]
            for r in wh.con.execute(
                "SELECT persona_id FROM personas WHERE benchmark_id = ?", [benchmark_id]
            ).fetchall()
        ]
        removed.update(_drop_personas(wh, tables, personas))
        for table, where, params in _benchmark_deletes(tables, benchmark_id, personas):
            delete(table, where, params)
    return removed


def _drop_personas(
    wh: Warehouse, tables: dict[str, set[str]], personas: list[str]
) -> dict[str, int]:
    """Delete each persona's content; returns the rows that went, per table."""
    before = {t: wh.scalar(f"SELECT count(*) FROM {t}") for t in tables}
    for pid in personas:
        delete_persona(wh, pid)
    removed: dict[str, int] = {}
    for t in tables:
        gone = before[t] - wh.scalar(f"SELECT count(*) FROM {t}")
        if gone:
            removed[t] = gone
    return removed


def _benchmark_deletes(
    tables: dict[str, set[str]], benchmark_id: str, personas: list[str]
) -> Iterator[tuple[str, str, list]]:
    """(table, condition, parameters) of every other delete, in order: the rows of the benchmark's
    evaluation and gate runs, then every table keyed by the benchmark or by one of its personas."""
    children = {"eval_run_id": "eval_runs", "gate_run_id": "gate_runs"}
    for column, parent in children.items():
        for table, cols in tables.items():
            if column in cols and "benchmark_id" not in cols and parent in tables:
                yield (
                    table,
                    f"{column} IN (SELECT {column} FROM {parent} WHERE benchmark_id = ?)",
                    [benchmark_id],
                )
    for table, cols in tables.items():
        if table == "llm_calls":
            continue
        if "benchmark_id" in cols:
            yield table, "benchmark_id = ?", [benchmark_id]
        elif "persona_id" in cols and personas:
            yield table, "persona_id IN (SELECT unnest(?::VARCHAR[]))", [personas]


def _base_tables(wh: Warehouse) -> dict[str, set[str]]:
    rows = wh.con.execute(
        "SELECT c.table_name, c.column_name FROM information_schema.columns c JOIN information_schema.tables t "
        "USING (table_schema, table_name) WHERE t.table_type = 'BASE TABLE' AND c.table_schema = 'main' "
        "AND c.table_name <> 'schema_migrations'"
    ).fetchall()
    out: dict[str, set[str]] = {}
    for table, column in rows:
        out.setdefault(table, set()).add(column)
    return out
