"""The DuckDB warehouse: one writer at a time (the lock file of :mod:`.lock`), read-only readers.

Writes are idempotent upserts keyed by deterministic ids; the schema comes from the versioned
DDL files in ``warehouse/ddl`` applied by :mod:`clonemem.warehouse.migrate`.

A writer holds ``<warehouse>.lock`` while its connection is open (re-entrant within a process, so
a CLI command can hold it across the stages it runs); a second writer waits, then gives up with a
"try again" line. Readers never wait: beside a running writer they read a snapshot copy.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from clonemem.errors import UserError
from clonemem.warehouse import scratch
from clonemem.warehouse.lock import WarehouseBusy, default_wait, is_held_elsewhere, writer_lock
from clonemem.warehouse.migrate import apply_schema, latest_version, schema_key, schema_version

# A bulk writer's row groups (see ``open_writer(bulk=True)``). DuckDB writes a transaction's appended rows to
# the file once a row group of them is full and keeps the rest in memory until the commit, which copies them
# to the WAL and then checkpoints them. At DuckDB's default (122,880 rows) an evaluation's whole landing
# (13,760 LLM calls with their prompts and replies) stayed in memory to the end; at 2,048, DuckDB's
# smallest, it goes to the file as it lands.
BULK_ROW_GROUP_ROWS = 2048
# and, on a bulk writer's own DuckDB instance: each full row group written at once, not buffered 5 at a
# time; one thread, so one set of per-thread buffers (a landing's inserts gain nothing from a second)
BULK_SETTINGS = ("SET write_buffer_row_group_count = 1", "SET threads = 1")


class _ClosedConnection:
    """Stands in for the connection of a closed warehouse: any use says so plainly."""

    def __init__(self, path: str) -> None:
        self._path = path

    def __getattr__(self, name: str) -> object:
        raise RuntimeError(f"warehouse {self._path} is closed")


class WarehouseError(RuntimeError, UserError):
    """A warehouse that cannot be opened or a statement that cannot run."""


class Warehouse:
    """A connection to the warehouse file. Use :meth:`open_writer` or :meth:`open_reader`."""

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        path: Path,
        read_only: bool,
        snapshot_dir: Path | None = None,
    ):
        self.con = con
        self.path = path
        self.read_only = read_only
        self._lock = threading.RLock()
        self._snapshot_dir = snapshot_dir
        self._in_tx = False
        self._closed = False
        self._writer_lock: Any = None

    # -- opening -----------------------------------------------------------------------------

    @classmethod
    def open_writer(
        cls, path: str | Path, *, wait_s: float | None = None, bulk: bool = False
    ) -> Warehouse:
        """Open (creating if needed) the warehouse for writing and bring its schema up to date.

        Takes the writer lock (waiting up to ``wait_s``, default ``$CLONEMEM_LOCK_WAIT`` or 600 s)
        and keeps it until :meth:`close`. A ``bulk`` writer, for one big transaction (an evaluation's
        landing), has a DuckDB instance of its own that writes the rows to the file as they come
        (:data:`BULK_ROW_GROUP_ROWS`) instead of holding them all in memory to the commit; meanwhile
        other connections of this process to the file wait for it. If this process already has the file
        open, it joins that connection as a plain writer would.
        """
        path = Path(path).expanduser().resolve()
        wait = default_wait() if wait_s is None else wait_s
        lock = writer_lock(path, wait_s=wait)
        lock.__enter__()
        try:
            con = _connect_writer(path, wait, bulk)
            try:
                apply_schema(con)
            except BaseException:
                con.close()
                raise
        except BaseException:
            lock.__exit__(None, None, None)
            raise
        wh = cls(con, path, read_only=False)
        wh._writer_lock = lock
        return wh

    @classmethod
    def open_reader(cls, path: str | Path) -> Warehouse:
        """Open the warehouse read-only. If another process is writing it, read a snapshot copy."""
        path = Path(path).expanduser().resolve()
        con, snap = connect_reader(path)
        return cls(con, path, read_only=True, snapshot_dir=snap)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self.con.close()
            # drop the handle too: a Warehouse kept alive by a traceback (Prefect keeps failed states) would
            # otherwise hold a DuckDB object until interpreter exit, where duckdb prints "leaked" dumps
            self.con = _ClosedConnection(str(self.path))  # type: ignore[assignment]  # a stand-in that raises on use once closed
        if self._snapshot_dir is not None:
            scratch.release(self._snapshot_dir)
        if self._writer_lock is not None:
            self._writer_lock.__exit__(None, None, None)
            self._writer_lock = None

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
        return self._insert("INSERT OR REPLACE", table, rows)

    def insert(self, table: str, rows: Sequence[Mapping[str, Any]] | pl.DataFrame) -> int:
        """Insert rows known to be new (a key already present is an error); columns are matched by name.
        Lighter than :meth:`upsert`, which holds much more memory for the conflict check on big rows."""
        return self._insert("INSERT", table, rows)

    def insert_missing(self, table: str, rows: Sequence[Mapping[str, Any]] | pl.DataFrame) -> int:
        """Insert the rows whose key is not there yet (content-addressed rows: one already there is equal)."""
        return self._insert("INSERT OR IGNORE", table, rows)

    def _insert(
        self, verb: str, table: str, rows: Sequence[Mapping[str, Any]] | pl.DataFrame
    ) -> int:
        frame = rows if isinstance(rows, pl.DataFrame) else _frame(rows)
        if frame.height == 0:
            return 0
        with self._lock:
            self.con.register("_upsert_rows", _ArrowStream(frame))
            try:
                with self.transaction() as con:
                    con.execute(f"{verb} INTO {table} BY NAME SELECT * FROM _upsert_rows")
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

    def rows(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
        with self._lock:
            return self.con.execute(sql, params or []).fetchall()

    def scalar(self, sql: str, params: Sequence[Any] | None = None) -> Any:
        got = self.rows(sql, params)
        return got[0][0] if got else None

    def _require_writer(self) -> None:
        if self.read_only:
            raise WarehouseError("this warehouse connection is read-only")


def _is_lock_conflict(exc: duckdb.Error) -> bool:
    # another process's lock on the file, or a bulk writer of this process holding it (it ends soon)
    return "lock" in str(exc).lower() or isinstance(exc, duckdb.ResourceInUseException)


def _connect_bulk(path: Path) -> duckdb.DuckDBPyConnection:
    """The file attached, under the name a plain connection gives it, to a DuckDB instance of its own
    with small row groups; a plain connection if this process already has the file open (the file can be
    attached once per process: the open connection is joined, as :func:`duckdb.connect` would), or if
    that name is taken in the new instance (a file named ``memory.duckdb``)."""
    con = duckdb.connect()
    try:
        for setting in BULK_SETTINGS:
            con.execute(setting)
        literal = str(path).replace("'", "''")
        con.execute(
            f"ATTACH '{literal}' (ROW_GROUP_SIZE {BULK_ROW_GROUP_ROWS})"
        )  # named as a plain connection names it
        name = con.execute(
            "SELECT database_name FROM duckdb_databases() WHERE path = ?", [str(path)]
        ).fetchall()[0][0]
        con.execute('USE "' + name.replace('"', '""') + '"')
    except (duckdb.ResourceInUseException, duckdb.BinderException, duckdb.CatalogException):
        con.close()
        return duckdb.connect(str(path))
    except BaseException:
        con.close()
        raise
    return con


def _connect_writer(path: Path, wait_s: float, bulk: bool = False) -> duckdb.DuckDBPyConnection:
    """Connect for writing; a reader of another process holding DuckDB's file lock is waited for."""
    if path.is_dir():
        raise WarehouseError(f"warehouse {path} is a folder, not a DuckDB file")
    path.parent.mkdir(parents=True, exist_ok=True)
    _copy_schema(path)
    deadline = time.monotonic() + wait_s
    told = False
    while True:
        try:
            return _connect_bulk(path) if bulk else duckdb.connect(str(path))
        except (duckdb.IOException, duckdb.ResourceInUseException) as exc:
            if not _is_lock_conflict(exc):
                raise WarehouseError(
                    f"cannot open warehouse {path} for writing: {_first_line(exc)}"
                ) from None
            here = isinstance(
                exc, duckdb.ResourceInUseException
            )  # a bulk writer of this process has it
            if time.monotonic() >= deadline:
                raise WarehouseBusy(
                    f"warehouse {path} is open in {'a bulk writer of this' if here else 'another'} "
                    f"process ({_first_line(exc)}); try again when it has finished"
                ) from None
            if not told:
                import sys

                print(
                    f"warehouse {path.name} is being {'written by a bulk writer of this' if here else 'read by another'}"
                    f" process; waiting up to {wait_s:g} s...",
                    file=sys.stderr,
                    flush=True,
                )
                told = True
            time.sleep(0.25)
        except duckdb.Error as exc:
            raise WarehouseError(
                f"cannot open warehouse {path} for writing: {_first_line(exc)}"
            ) from None


# -- new files ------------------------------------------------------------------------------
#
# A new warehouse gets every migration and view: ~0.3 s of DDL and its checkpoint. A process that makes a
# second new file (a test run, a script importing into several warehouses) makes an empty warehouse once,
# in its scratch folder, and copies it for the second and every later one (a copy of the small file takes
# about a millisecond); the schema's files name the copy, so a changed schema never gets a stale one. The
# first new file of a process is migrated in place, as before: a command making one file pays nothing more.

_schema_lock = threading.Lock()
_new_files = 0
_schemas: dict[str, Path] = {}


def _copy_schema(path: Path) -> None:
    """Make ``path`` (when neither it nor a WAL of it exists) a copy of this process's empty warehouse of
    the current schema, from the process's second new file on. Called with the writer lock held."""
    global _new_files
    if path.exists() or path.with_name(path.name + ".wal").exists():
        return
    with _schema_lock:
        _new_files += 1
        if _new_files < 2:
            return
        key = schema_key()
        empty = _schemas.get(key)
        if empty is None or not empty.exists():
            empty = _schemas[key] = _empty_warehouse(key)
    part = path.with_name(f".{path.name}.{os.getpid()}-{threading.get_ident()}.part")
    try:
        shutil.copyfile(empty, part)
        try:
            os.link(part, path)  # never over a file that appeared meanwhile
        except FileExistsError:
            pass
        except OSError:  # a file system without hard links
            if not path.exists():
                os.replace(part, path)
    except OSError as exc:  # a full disk, a folder not writable: nothing is left behind
        raise WarehouseError(f"cannot create warehouse {path}: {exc.strerror or exc}") from None
    finally:
        part.unlink(missing_ok=True)


def _empty_warehouse(key: str) -> Path:
    file = scratch.named(scratch.SCHEMA, key) / "empty.duckdb"
    file.unlink(missing_ok=True)
    file.with_name(file.name + ".wal").unlink(missing_ok=True)
    con = duckdb.connect(str(file))
    try:
        apply_schema(con)
    finally:
        con.close()
    return file


def _snapshot(path: Path) -> Path:
    """Copy the warehouse (and its WAL) to a fresh temporary folder owned by this process (see
    :mod:`.scratch`: removed on close, at exit, or by the next reader once this process is gone)."""
    snap = scratch.make(scratch.SNAPSHOT)
    try:
        shutil.copy2(path, snap / path.name)
        wal = path.with_name(path.name + ".wal")
        if wal.exists():
            try:
                shutil.copy2(wal, snap / wal.name)
            except FileNotFoundError:  # checkpointed away while copying
                pass
    except BaseException:
        scratch.release(snap)
        raise
    return snap


def reader_file(path: Path) -> tuple[Path, Path | None]:
    """The file a reader should open: the warehouse itself, or a snapshot copy beside a running writer.

    Returns ``(file, snapshot_dir)``; the caller removes ``snapshot_dir`` when done.
    """
    path = Path(path).expanduser().resolve()
    scratch.sweep()  # snapshot copies and spill folders of readers that were killed
    if not path.exists():
        raise WarehouseError(
            f"no warehouse at {path} (run `clonemem demo` or `clonemem import-release` first)"
        )
    if not path.is_file():
        raise WarehouseError(f"warehouse {path} is not a file")
    if is_held_elsewhere(path):
        snap = _snapshot(path)
        return snap / path.name, snap
    return path, None


def connect_reader(
    path: Path,
    config: dict | Callable[[Path], dict] | None = None,
) -> tuple[duckdb.DuckDBPyConnection, Path | None]:
    """A read-only connection (optionally with ``config``, or the config for the file it opens: the
    warehouse or a snapshot copy) and the snapshot folder it reads, if any."""
    last: Exception | None = None
    for attempt in range(4):
        file, snap = reader_file(path) if attempt == 0 else (None, None)
        if file is None:  # DuckDB's own lock was held, or a copy was taken mid-write: copy again
            snap = _snapshot(path)
            file = snap / path.name
        try:
            settings = config(file) if callable(config) else dict(config or {})
            con = duckdb.connect(str(file), read_only=True, config=settings)
        except duckdb.Error as exc:
            scratch.release(snap)
            last = exc
            if snap is None and not _is_lock_conflict(exc):
                raise WarehouseError(f"cannot open warehouse {path}: {_first_line(exc)}") from None
            time.sleep(0.2 * attempt)
            continue
        try:
            _check_schema(con, path)
        except BaseException:
            con.close()
            scratch.release(snap)
            raise
        return con, snap
    raise WarehouseError(
        f"cannot open warehouse {path}: {_first_line(last) if last else 'unknown error'}"
    )


def _check_schema(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """A reader's file must carry the schema this code reads: not an empty file a first writer is still
    setting up (or some other DuckDB file), not an older schema only a writer brings up to date, not a
    newer one made by a later clonemem."""
    try:
        found = schema_version(con)
    except duckdb.Error as exc:
        raise WarehouseError(f"cannot read warehouse {path}: {_first_line(exc)}") from None
    want = latest_version()
    if found is None:
        raise WarehouseError(
            f"{path} is not a clonemem warehouse yet: it has no clonemem schema (a first writer may "
            "still be setting it up); fill it with `clonemem demo` or `clonemem import FORMAT ...`"
        )
    if found < want:
        raise WarehouseError(
            f"warehouse {path} has schema version {found}; this clonemem reads version {want}. Any "
            "command that writes (e.g. `clonemem import ...`, `clonemem generate`) brings it up to date"
        )
    if found > want:
        raise WarehouseError(
            f"warehouse {path} has schema version {found}, made by a newer clonemem; this one reads "
            f"up to version {want}: upgrade clonemem to read it"
        )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class _ArrowStream:
    """A polars frame seen as an Arrow C stream (the PyCapsule protocol): DuckDB scans it without
    pyarrow, whose import alone took ~45 MB of every landing process's resident memory."""

    def __init__(self, frame: pl.DataFrame) -> None:
        # An all-None column is polars' Null type, exported without a validity bitmap, which DuckDB
        # refuses; as text it inserts into any column type (NULL casts to anything).
        nulls = [name for name, dtype in frame.schema.items() if dtype == pl.Null]
        self._frame = frame.with_columns(pl.col(nulls).cast(pl.Utf8)) if nulls else frame

    def __arrow_c_stream__(self, requested_schema: object = None) -> object:
        return self._frame.__arrow_c_stream__(requested_schema)


def _frame(rows: Sequence[Mapping[str, Any]]) -> pl.DataFrame:
    # infer over all rows: a column that is None in the first rows must not become Null-typed.
    return pl.DataFrame(list(rows), infer_schema_length=None)
