"""The one workaround GX needs for DuckDB, kept in one place.

GX 1.24.1 with duckdb-engine 0.17.0 reads metric results after closing the SQLAlchemy connection it
ran them on; duckdb-engine then returns nothing and every expectation fails with an IndexError in
``resolve_metric_bundle`` (upstream great_expectations issues #10738, #11579; a native DuckDB
engine, PR #12084, is still open). GX already keeps one persisted connection for dialects that need
it (sqlite, mssql, ...); this does the same for duckdb.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from clonemem.thirdparty import written_for

# the version of GX whose internals this module relies on (the execution engine's `get_connection`, the
# `_connection` it keeps): checked before each use
GX_VERSION = "1.24.1"
_WHAT = "clonemem.expectations.gx_duckdb (GX's DuckDB connection)"
_patched = False
# What may hold the warehouse open, recorded as it opens (scanning the heap for it took about a second
# per gate in a big process): GX's execution engines with a persisted connection, and every SQLAlchemy
# engine that connected to DuckDB (GX's datasources make engines of their own besides the execution
# engines' ones).
_persisting: weakref.WeakSet[Any] = weakref.WeakSet()
_duckdb_engines: weakref.WeakSet[Any] = weakref.WeakSet()


def _record_engine(connection: Any) -> None:
    """SQLAlchemy's ``engine_connect`` event, for every engine: keeps the DuckDB ones."""
    if connection.engine.url.drivername.startswith("duckdb"):
        _duckdb_engines.add(connection.engine)


def patch_duckdb_connection() -> None:
    global _patched
    if _patched:
        return
    written_for("great-expectations", GX_VERSION, _WHAT)
    import sqlalchemy
    from great_expectations.execution_engine import sqlalchemy_execution_engine as engine_module

    original = engine_module.SqlAlchemyExecutionEngine.get_connection

    @contextmanager
    def get_connection(self) -> Iterator[object]:
        if self.dialect_name != "duckdb":
            with original(self) as connection:
                yield connection
            return
        if getattr(self, "_connection", None) is None:
            self._connection = self.engine.connect()
            _persisting.add(self)
        try:
            yield self._connection
        except Exception:
            # a failed query aborts DuckDB's transaction; without this every later query fails too
            self._connection.rollback()
            raise

    # a patch of GX's method, checked against its version first (setattr: mypy forbids assigning to a
    # method, which is exactly what this does on purpose)
    setattr(engine_module.SqlAlchemyExecutionEngine, "get_connection", get_connection)
    sqlalchemy.event.listen(sqlalchemy.engine.Engine, "engine_connect", _record_engine)
    _patched = True


def close_engine(execution_engine: object) -> None:
    """Release the persisted connection and the engine, so the warehouse file can be opened for writing."""
    connection = getattr(execution_engine, "_connection", None)
    if connection is not None:
        connection.close()
        execution_engine._connection = None  # type: ignore[attr-defined]  # GX internals: the persisted connection
    engine = getattr(execution_engine, "engine", None)
    if engine is not None:
        engine.dispose()


def close_all_engines() -> None:
    """GX builds execution engines of its own (checkpoints reload datasources from the context), so
    close every one that connected since the patch: DuckDB refuses the writer while they hold the file."""
    written_for("great-expectations", GX_VERSION, _WHAT)
    for execution_engine in list(_persisting):
        close_engine(execution_engine)
    _persisting.clear()
    for engine in list(_duckdb_engines):
        engine.dispose()
    _duckdb_engines.clear()
