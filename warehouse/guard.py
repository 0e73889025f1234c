"""The guarded SQL surface: ad-hoc queries that can neither write nor reach outside the warehouse.

Used by ``clonemem sql`` and by every read of the dashboard. Safety comes from DuckDB's own
switches, set when the connection opens and then locked, not from a keyword filter:

- the warehouse is opened ``read_only`` (a snapshot copy when another process is writing it);
- ``enable_external_access = false``: no file, network or ``ATTACH`` access outside the database
  (``read_csv``, ``read_text``, ``COPY … TO``, ``EXPORT DATABASE``, logging to files …);
- extensions are never installed or loaded (``autoinstall``/``autoload_known_extensions`` off,
  no community or unsigned extensions), so nothing is downloaded;
- ``memory_limit``, ``max_temp_directory_size`` and ``threads`` bound the resources a query may use
  (memory and spill space: ``$CLONEMEM_SQL_MEMORY_LIMIT`` and ``$CLONEMEM_SQL_TEMP_LIMIT``, or
  ``clonemem sql --memory-limit/--temp-limit``, 1 GB each by default); a query needing more fails with
  one line saying which bound it met;
- spilling goes to a folder of this process's own in the system's temporary folder
  (``clonemem-sqltmp-<pid>-*``, or inside a snapshot copy's folder), never beside the warehouse; it
  is removed when the last connection using it closes, and a killed process's is removed by the next
  reader (:mod:`clonemem.warehouse.scratch`);
- ``lock_configuration = true`` last: no ``SET``/``RESET``/``PRAGMA`` can undo any of the above.

A statement-type check runs first as a second line, so that refusals read well: only queries
(``SELECT``, ``WITH``, ``VALUES``, ``DESCRIBE``, ``SHOW``, ``SUMMARIZE``, plain ``EXPLAIN``) pass;
``EXPLAIN ANALYZE`` executes its statement and is refused. Every result is cut at ``max_rows``
(``QueryResult.truncated`` says so) and a query running longer than ``timeout_s`` is interrupted
from a timer thread. Error messages are DuckDB's first line with no echo of the environment.

API::

    with open_guarded(path, max_rows=10_000, timeout_s=30) as con:
        for result in con.query("SELECT * FROM v_benchmarks"):   # one QueryResult per statement
            result.columns, result.rows, result.truncated
        frame = con.frame("SELECT ... WHERE x = ?", [value])      # one statement -> polars DataFrame

Refusals and failures raise :class:`SqlRefused` (a ``ValueError``) with one clear line.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import NoReturn

import duckdb
import polars as pl

from clonemem import settings
from clonemem.errors import UserError
from clonemem.ids import stable_hash
from clonemem.warehouse import scratch

DEFAULT_MAX_ROWS = 10_000
DEFAULT_TIMEOUT_S = 30.0

# Applied at connect time (DuckDB refuses to change some of them later), then locked.
_CONFIG = {
    "enable_external_access": False,
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "allow_community_extensions": False,
    "allow_unsigned_extensions": False,
    "allow_unredacted_secrets": False,
    "threads": 2,
}
MEMORY_ENV = settings.SQL_MEMORY_LIMIT
TEMP_ENV = settings.SQL_TEMP_LIMIT
DEFAULT_MEMORY_LIMIT = "1GB"
DEFAULT_TEMP_LIMIT = "1GB"
_SIZE = re.compile(r"^\s*\d+(\.\d+)?\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)\s*$", re.IGNORECASE)

# Statement types that only read. EXPLAIN is checked further (no ANALYZE); PRAGMA and CALL can
# change settings or invoke logging, and the views/SELECTs cover what they would show.
_READ_TYPES = {"SELECT"}
_EXPLAIN = re.compile(
    r"^\s*EXPLAIN\s*(\((?P<options>[^)]*)\))?\s*(?P<analyze>ANALY[SZ]E\b)?(?P<inner>.*)$",
    re.IGNORECASE | re.DOTALL,
)


class SqlRefused(ValueError, UserError):
    """A statement the guarded surface does not run, or a query that failed; the message is one line."""


@dataclass(frozen=True)
class QueryResult:
    columns: list[str]
    rows: list[tuple]
    truncated: bool = False


@dataclass(frozen=True)
class Limits:
    max_rows: int = DEFAULT_MAX_ROWS
    timeout_s: float = DEFAULT_TIMEOUT_S
    memory_limit: str = DEFAULT_MEMORY_LIMIT
    temp_limit: str = DEFAULT_TEMP_LIMIT


def size_limit(value: str | None, env: str, default: str) -> str:
    """A DuckDB size (``512MB``, ``2GB``): ``value``, else ``$env``, else ``default``; checked here so a
    typo is one line naming where it came from, not DuckDB's parser error."""
    now = settings.current()
    option, from_env = {
        MEMORY_ENV: ("--memory-limit", now.sql_memory_limit),
        TEMP_ENV: ("--temp-limit", now.sql_temp_limit),
    }[env]
    source, chosen = (option, value) if value else (f"${env}", from_env)
    if chosen is None:
        return default
    if not _SIZE.match(chosen):
        raise SqlRefused(f"{source}: {chosen!r} is not a size (write it like 512MB or 2GB)")
    return chosen.replace(" ", "")


def check_statements(query: str, parser: duckdb.DuckDBPyConnection | None = None) -> list[str]:
    """Split ``query`` into statements and refuse any that is not a plain query; returns their SQL.

    ``parser`` is a connection to parse with (parsing executes nothing); without one a throw-away
    in-memory connection is opened, which costs about 10 ms."""
    own = parser is None
    if parser is None:
        parser = duckdb.connect(":memory:", config={"enable_external_access": False})
    try:
        statements = parser.extract_statements(query)
    except duckdb.Error as exc:
        raise SqlRefused(f"cannot parse the query: {_first_line(exc)}") from None
    finally:
        if own:
            parser.close()
    if not statements:
        raise SqlRefused("empty query")
    out = []
    for stmt in statements:
        try:
            kind = stmt.type.name
        except (
            ValueError
        ):  # a statement type this DuckDB's Python enum does not list (UPDATE EXTENSIONS)
            kind = "UNKNOWN"
        if kind == "EXPLAIN":
            _check_explain(stmt.query, None if own else parser)
        elif kind not in _READ_TYPES:
            _refuse(f"{statement_name(stmt.query, kind)} statements are")
        out.append(stmt.query)
    return out


_LEADING_COMMENTS = re.compile(r"^(\s+|--[^\n]*(\n|$)|/\*.*?\*/)*", re.DOTALL)
_KEYWORD = re.compile(r"(FORCE\s+)?([A-Za-z]+)", re.IGNORECASE)


def statement_name(sql: str, kind: str) -> str:
    """What a refusal calls a statement: its leading keyword as written (DuckDB files INSTALL under
    LOAD, CHECKPOINT under CALL, ANALYZE under VACUUM, USE and RESET under SET), else DuckDB's type
    (a ``WITH … INSERT`` is an INSERT)."""
    lead = _LEADING_COMMENTS.match(sql)  # matches every string (all of its parts are optional)
    m = _KEYWORD.match(sql, lead.end() if lead else 0)
    if m is None or m[2].upper() == "WITH":
        return kind.replace("_", " ")
    if kind == "UNKNOWN":  # no type to go by: its first two words (UPDATE EXTENSIONS)
        return " ".join(sql[m.start() :].split()[:2]).upper()
    return ("FORCE " if m[1] else "") + m[2].upper()


def _refuse(what: str) -> NoReturn:
    raise SqlRefused(
        f"read-only SQL: {what} refused; only queries (SELECT, WITH, DESCRIBE, SHOW, SUMMARIZE, "
        "EXPLAIN) run, and the warehouse changes only through the pipeline's commands"
    )


def _check_explain(sql: str, parser: duckdb.DuckDBPyConnection | None = None) -> None:
    """Plain EXPLAIN of a query only: EXPLAIN ANALYZE executes the statement it wraps."""
    m = _EXPLAIN.match(sql)
    if m is None or m["analyze"] or re.search(r"ANALY[SZ]E", m["options"] or "", re.IGNORECASE):
        _refuse("EXPLAIN ANALYZE (it executes its statement) is")
    inner = check_statements(m["inner"], parser) if m["inner"].strip() else []
    if len(inner) != 1:
        _refuse("EXPLAIN of anything but one query is")


class GuardedConnection:
    """A locked-down read-only connection; see the module docstring."""

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        limits: Limits,
        snapshot_dir: Path | None = None,
        spill: Path | None = None,
    ):
        self._con = con
        self.limits = limits
        self._snapshot_dir = snapshot_dir
        self._spill = (
            spill  # the shared spill folder this connection holds a count on (None in a snapshot)
        )
        self._temp_folder = spill or (snapshot_dir / "spill" if snapshot_dir is not None else None)
        self._lock = threading.Lock()

    @property
    def is_snapshot(self) -> bool:
        """True when a writer was running and this reads a copy taken at open time."""
        return self._snapshot_dir is not None

    def query(self, sql: str) -> list[QueryResult]:
        """Run every statement of ``sql`` (queries only) and return their results, each cut at ``max_rows``."""
        return [self._run(stmt) for stmt in self._check(sql)]

    def frame(
        self, sql: str, params: Sequence[object] | Mapping[str, object] | None = None
    ) -> pl.DataFrame:
        """One query as a polars DataFrame (cut at ``max_rows``); ``params`` bind its ``?`` or ``$name``
        placeholders, so callers never format values into SQL."""
        statements = self._check(sql)
        if len(statements) != 1:
            raise SqlRefused("expected exactly one statement")
        r = self._run(statements[0], params)
        return pl.DataFrame(r.rows, schema=r.columns, orient="row", infer_schema_length=None)

    def _check(self, sql: str) -> list[str]:
        with self._lock:  # parsed by this connection: no throw-away parser per query
            return check_statements(sql, self._con)

    def _run(
        self, stmt: str, params: Sequence[object] | Mapping[str, object] | None = None
    ) -> QueryResult:
        with self._lock:
            watch = _Watch(self._con, self.limits, self._temp_folder)
            try:
                cur = self._con.execute(stmt, params) if params else self._con.execute(stmt)
                columns = [d[0] for d in cur.description] if cur.description else []
                rows = cur.fetchmany(self.limits.max_rows + 1) if columns else []
            except duckdb.OutOfMemoryException as exc:
                raise SqlRefused(
                    f"query stopped: it needs more than the SQL surface's {self.limits.memory_limit} of memory and "
                    f"{self.limits.temp_limit} of spill space (narrow it, or raise --memory-limit/--temp-limit, "
                    f"${MEMORY_ENV}/${TEMP_ENV}): {_first_line(exc)}"
                ) from None
            except duckdb.PermissionException as exc:
                raise SqlRefused(
                    f"refused: the SQL surface cannot touch files, the network, extensions or "
                    f"settings ({_first_line(exc)})"
                ) from None
            except duckdb.Error as exc:
                if watch.stopped_for:
                    raise SqlRefused(watch.stopped_for) from None
                if isinstance(exc, duckdb.InterruptException):
                    raise SqlRefused("query interrupted") from None
                if isinstance(
                    exc, duckdb.InvalidInputException
                ) and "configuration has been locked" in str(exc):
                    raise SqlRefused(
                        f"refused: the SQL surface cannot change settings ({_first_line(exc)})"
                    ) from None
                raise SqlRefused(_first_line(exc)) from None
            finally:
                watch.stop()
        truncated = len(rows) > self.limits.max_rows
        return QueryResult(columns, rows[: self.limits.max_rows], truncated)

    def interrupt(self) -> None:
        """Stop the running query (from another thread; it raises in the thread that runs it)."""
        self._con.interrupt()

    def close(self) -> None:
        with self._lock:
            if self._con is None:
                return
            self._con.close()
            self._con = None  # type: ignore[assignment]  # closed: no connection left to use
        scratch.release(self._snapshot_dir)
        self._snapshot_dir = None
        _drop_spill(self._spill)
        self._spill = None

    def __enter__(self) -> GuardedConnection:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def open_guarded(
    path: str | Path,
    *,
    max_rows: int = DEFAULT_MAX_ROWS,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    memory_limit: str | None = None,
    temp_limit: str | None = None,
) -> GuardedConnection:
    """Open the warehouse at ``path`` for guarded ad-hoc reads (a snapshot copy beside a running writer).

    ``memory_limit`` and ``temp_limit`` (DuckDB sizes) default to ``$CLONEMEM_SQL_MEMORY_LIMIT`` and
    ``$CLONEMEM_SQL_TEMP_LIMIT``, else 1 GB each."""
    from clonemem.warehouse.db import WarehouseError, connect_reader

    if max_rows < 1 or timeout_s <= 0:
        raise ValueError("max_rows must be >= 1 and timeout_s > 0")
    limits = Limits(
        max_rows,
        timeout_s,
        size_limit(memory_limit, MEMORY_ENV, DEFAULT_MEMORY_LIMIT),
        size_limit(temp_limit, TEMP_ENV, DEFAULT_TEMP_LIMIT),
    )
    warehouse = Path(path).expanduser().resolve()
    spill: Path | None = _take_spill(
        warehouse
    )  # counted before connecting: a closing neighbour keeps it

    def config_for(file: Path) -> dict:
        # a snapshot spills inside its own folder (removed with it); the warehouse into this process's folder
        folder = file.parent / "spill" if file != warehouse else spill
        return {
            **_CONFIG,
            "memory_limit": limits.memory_limit,
            "max_temp_directory_size": limits.temp_limit,
            "temp_directory": str(folder),
        }

    try:
        con, snapshot_dir = connect_reader(warehouse, config_for)
    except BaseException:
        _drop_spill(spill)
        raise
    if snapshot_dir is not None:
        _drop_spill(spill)
        spill = None
    try:
        _quiet(con)
        _lock_configuration(con)
    except duckdb.Error as exc:
        con.close()
        scratch.release(snapshot_dir)
        _drop_spill(spill)
        raise WarehouseError(f"cannot open warehouse {path}: {_first_line(exc)}") from None
    return GuardedConnection(con, limits, snapshot_dir, spill)


class _Watch:
    """Stops the running query (``interrupt``) at the time limit, or once the spill folder holds more than
    the temp limit: DuckDB's own ``max_temp_directory_size`` is set too, but its sorts and aggregates were
    seen writing several times that, so the bound is kept by watching the folder."""

    POLL_S = 0.05

    def __init__(self, con: duckdb.DuckDBPyConnection, limits: Limits, folder: Path | None):
        self.stopped_for: str | None = None
        self._con, self._limits, self._folder = con, limits, folder
        self._max_bytes = size_bytes(limits.temp_limit)
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="clonemem-sql-watch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        deadline = time.monotonic() + self._limits.timeout_s
        while not self._done.wait(min(self.POLL_S, max(0.0, deadline - time.monotonic()))):
            if time.monotonic() >= deadline:
                self._stop(f"query stopped after the {self._limits.timeout_s:g} s time limit")
                return
            if self._folder is not None and folder_bytes(self._folder) > self._max_bytes:
                self._stop(
                    f"query stopped: it spilled more than the SQL surface's {self._limits.temp_limit} of "
                    f"temporary space (narrow it, or raise --temp-limit / ${TEMP_ENV})"
                )
                return

    def _stop(self, why: str) -> None:
        self.stopped_for = why
        self._con.interrupt()

    def stop(self) -> None:
        self._done.set()
        self._thread.join()


def folder_bytes(folder: Path) -> int:
    """Bytes on disk of the files in ``folder`` (DuckDB's spill files; missing: 0)."""
    total = 0
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                try:
                    total += entry.stat(follow_symlinks=False).st_blocks * 512
                except OSError:  # removed while counting
                    pass
    except OSError:
        return 0
    return total


_UNITS = {
    "B": 1,
    "KB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
    "TB": 10**12,
    "KIB": 2**10,
    "MIB": 2**20,
    "GIB": 2**30,
    "TIB": 2**40,
}


def size_bytes(size: str) -> int:
    """``512MB`` -> 512,000,000 (DuckDB's reading: KB = 1000 B, KiB = 1024 B)."""
    m = re.match(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]+)\s*$", size)
    if m is None or m[2].upper() not in _UNITS:
        raise SqlRefused(f"{size!r} is not a size (write it like 512MB or 2GB)")
    return int(float(m[1]) * _UNITS[m[2].upper()])


# One spill folder per (process, warehouse): connections of a process to one file share a DuckDB
# instance, whose settings (its temp_directory among them) must be the same for all of them. The folder
# is removed when the last of them closes (DuckDB has removed its files by then).
_spills: dict[Path, int] = {}
_spills_lock = threading.Lock()


def _take_spill(warehouse: Path) -> Path:
    key = stable_hash(str(warehouse))[:12]
    with _spills_lock:
        folder = scratch.named(scratch.SPILL, key)
        _spills[folder] = _spills.get(folder, 0) + 1
    return folder


def _drop_spill(folder: Path | None) -> None:
    if folder is None:
        return
    with _spills_lock:
        left = _spills.get(folder, 1) - 1
        if left > 0:
            _spills[folder] = left
            return
        _spills.pop(folder, None)
        scratch.release(folder)


def _quiet(con: duckdb.DuckDBPyConnection) -> None:
    """No progress bar on stdout (a per-connection setting; refused once the instance is locked, when an
    earlier connection has already set it for itself and this one is served the same way)."""
    try:
        con.execute("SET enable_progress_bar = false")
    except duckdb.InvalidInputException:
        pass


def _lock_configuration(con: duckdb.DuckDBPyConnection) -> None:
    """Lock the configuration. Connections of one process to one file share a database instance, and so
    its settings: while another guarded connection to the file is open (a second dashboard session,
    say) the instance is already locked, which is the state wanted, and SET itself is refused."""
    try:
        con.execute("SET lock_configuration = true")
    except duckdb.InvalidInputException as exc:
        locked = con.execute("SELECT current_setting('lock_configuration')").fetchone()
        if "configuration has been locked" not in str(exc) or not locked or locked[0] is not True:
            raise


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
