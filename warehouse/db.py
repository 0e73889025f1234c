"""The DuckDB warehouse: one writer per process (serialised by a lock), read-only readers.

Writes are idempotent upserts keyed by deterministic ids; the schema comes from the versioned
DDL files in ``warehouse/ddl`` applied by :mod:`clonemem.warehouse.migrate`.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from clonemem.warehouse.migrate import apply_migrations


class WarehouseError(RuntimeError):
    """A warehouse that cannot be opened or a statement that cannot run."""


class Warehouse:
    """A connection to the warehouse file. Use :meth:`open_writer` or :meth:`open_reader`."""

    def __init__(self, con: duckdb.DuckDBPyConnection, path: Path, read_only: bool, snapshot_dir: Path | None = None):
        self.con = con
        self.path = path
        self.read_only = read_only
        self._lock = threading.RLock()
        self._snapshot_dir = snapshot_dir
        self._in_tx = False

    # -- opening -----------------------------------------------------------------------------

    @classmethod
    def open_writer(cls, path: str | Path) -> Warehouse:
        """Open (creating if needed) the warehouse for writing and bring its schema up to date."""
        path = Path(path).expanduser().resolve()
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            con = duckdb.connect(str(path))
        except duckdb.IOException as exc:
            raise WarehouseError(f"cannot open warehouse {path} for writing: {exc}") from exc
        apply_migrations(con)
        return cls(con, path, read_only=False)

    @classmethod
    def open_reader(cls, path: str | Path) -> Warehouse:
        """Open the warehouse read-only. If another process holds the write lock, read a snapshot copy."""
        path = Path(path).expanduser().resolve()
        if not path.exists():
            raise WarehouseError(f"no warehouse at {path} (run `clonemem demo` or `clonemem import-release` first)")
        try:
            return cls(duckdb.connect(str(path), read_only=True), path, read_only=True)
        except duckdb.IOException as exc:
            if "lock" not in str(exc).lower():
                raise WarehouseError(f"cannot open warehouse {path}: {exc}") from exc
        # A writer is running: DuckDB allows no reader beside it, so read a consistent-enough copy.
        snap = Path(tempfile.mkdtemp(prefix="clonemem-snapshot-"))
        shutil.copy2(path, snap / path.name)
        wal = path.with_name(path.name + ".wal")
        if wal.exists():
            shutil.copy2(wal, snap / wal.name)
        con = duckdb.connect(str(snap / path.name), read_only=True)
        return cls(con, path, read_only=True, snapshot_dir=snap)

    def close(self) -> None:
        with self._lock:
            self.con.close()
        if self._snapshot_dir is not None:
            shutil.rmtree(self._snapshot_dir, ignore_errors=True)

    def __enter__(self) -> Warehouse:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing -----------------------------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """All-or-nothing block; nested use joins the outer transaction."""
        self._require_writer()
        with self._lock:
            if self._in_tx:
                yield self.con
                return
            self._in_tx = True
            self.con.execute("BEGIN TRANSACTION")
            try:
                yield self.con
            except BaseException:
                self.con.execute("ROLLBACK")
                raise
            else:
                self.con.execute("COMMIT")
            finally:
                self._in_tx = False

    def upsert(self, table: str, rows: Sequence[Mapping[str, Any]] | pl.DataFrame) -> int:
        """Insert-or-replace rows by primary key; columns are matched by name. Returns the row count."""
        frame = rows if isinstance(rows, pl.DataFrame) else _frame(rows)
        if frame.height == 0:
            return 0
        with self._lock:
            self.con.register("_upsert_rows", frame)
            try:
                with self.transaction() as con:
                    con.execute(f"INSERT OR REPLACE INTO {table} BY NAME SELECT * FROM _upsert_rows")
            finally:
                # after the transaction ends: an aborted transaction refuses even this
                if not self._in_tx:
                    self.con.unregister("_upsert_rows")
        return frame.height

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> None:
        self._require_writer()
        with self._lock:
            self.con.execute(sql, params or [])

    # -- reading -----------------------------------------------------------------------------

    def frame(self, sql: str, params: Sequence[Any] | None = None) -> pl.DataFrame:
        with self._lock:
            return self.con.execute(sql, params or []).pl()

    def rows(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
        with self._lock:
            return self.con.execute(sql, params or []).fetchall()

    def scalar(self, sql: str, params: Sequence[Any] | None = None) -> Any:
        got = self.rows(sql, params)
        return got[0][0] if got else None

    def _require_writer(self) -> None:
        if self.read_only:
            raise WarehouseError("this warehouse connection is read-only")


def _frame(rows: Sequence[Mapping[str, Any]]) -> pl.DataFrame:
    # infer over all rows: a column that is None in the first rows must not become Null-typed.
    return pl.DataFrame(list(rows), infer_schema_length=None)
