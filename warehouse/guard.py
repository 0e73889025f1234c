"""The guarded SQL surface: ad-hoc queries that can neither write nor reach outside the warehouse.

Used by ``clonemem sql`` and by every read of the dashboard. Safety comes from DuckDB's own
switches, set when the connection opens and then locked, not from a keyword filter:

- the warehouse is opened ``read_only`` (a snapshot copy when another process is writing it);
- ``enable_external_access = false``: no file, network or ``ATTACH`` access outside the database
  (``read_csv``, ``read_text``, ``COPY … TO``, ``EXPORT DATABASE``, logging to files …);
- extensions are never installed or loaded (``autoinstall``/``autoload_known_extensions`` off,
  no community or unsigned extensions), so nothing is downloaded;
- ``memory_limit`` and ``threads`` bound the resources a query may use;
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

import re
import shutil
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import duckdb
import polars as pl

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
    "memory_limit": "1GB",
    "threads": 2,
}

# Statement types that only read. EXPLAIN is checked further (no ANALYZE); PRAGMA and CALL can
# change settings or invoke logging, and the views/SELECTs cover what they would show.
_READ_TYPES = {"SELECT"}
_EXPLAIN = re.compile(r"^\s*EXPLAIN\s*(\((?P<options>[^)]*)\))?\s*(?P<analyze>ANALY[SZ]E\b)?(?P<inner>.*)$",
                      re.IGNORECASE | re.DOTALL)


class SqlRefused(ValueError):
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
        kind = stmt.type.name
        if kind == "EXPLAIN":
            _check_explain(stmt.query, None if own else parser)
        elif kind not in _READ_TYPES:
            _refuse(f"{kind} statements are")
        out.append(stmt.query)
    return out


def _refuse(what: str) -> None:
    raise SqlRefused(f"read-only SQL: {what} refused; only queries (SELECT, WITH, DESCRIBE, SHOW, SUMMARIZE, "
                     "EXPLAIN) run, and the warehouse changes only through the pipeline's commands")


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

    def __init__(self, con: duckdb.DuckDBPyConnection, limits: Limits, snapshot_dir: Path | None = None):
        self._con = con
        self.limits = limits
        self._snapshot_dir = snapshot_dir
        self._lock = threading.Lock()

    @property
    def is_snapshot(self) -> bool:
        """True when a writer was running and this reads a copy taken at open time."""
        return self._snapshot_dir is not None

    def query(self, sql: str) -> list[QueryResult]:
        """Run every statement of ``sql`` (queries only) and return their results, each cut at ``max_rows``."""
        return [self._run(stmt) for stmt in self._check(sql)]

    def frame(self, sql: str, params: Sequence[object] | Mapping[str, object] | None = None) -> pl.DataFrame:
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

    def _run(self, stmt: str, params: Sequence[object] | Mapping[str, object] | None = None) -> QueryResult:
        with self._lock:
            timer = threading.Timer(self.limits.timeout_s, self._con.interrupt)
            timed_out = threading.Event()
            timer.function = lambda: (timed_out.set(), self._con.interrupt())
            timer.daemon = True
            timer.start()
            try:
                cur = self._con.execute(stmt, params) if params else self._con.execute(stmt)
                columns = [d[0] for d in cur.description] if cur.description else []
                rows = cur.fetchmany(self.limits.max_rows + 1) if columns else []
            except duckdb.InterruptException:
                raise SqlRefused(f"query stopped after the {self.limits.timeout_s:g} s time limit") from None
            except duckdb.PermissionException as exc:
                raise SqlRefused(f"refused: the SQL surface cannot touch files, the network, extensions or "
                                 f"settings ({_first_line(exc)})") from None
            except duckdb.InvalidInputException as exc:
                if "configuration has been locked" in str(exc):
                    raise SqlRefused(f"refused: the SQL surface cannot change settings ({_first_line(exc)})") from None
                raise SqlRefused(_first_line(exc)) from None
            except duckdb.Error as exc:
                if timed_out.is_set():
                    raise SqlRefused(f"query stopped after the {self.limits.timeout_s:g} s time limit") from None
                raise SqlRefused(_first_line(exc)) from None
            finally:
                timer.cancel()
        truncated = len(rows) > self.limits.max_rows
        return QueryResult(columns, rows[: self.limits.max_rows], truncated)

    def interrupt(self) -> None:
        """Stop the running query (from another thread; it raises in the thread that runs it)."""
        self._con.interrupt()

    def close(self) -> None:
        with self._lock:
            self._con.close()
        if self._snapshot_dir is not None:
            shutil.rmtree(self._snapshot_dir, ignore_errors=True)
            self._snapshot_dir = None

    def __enter__(self) -> GuardedConnection:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def open_guarded(path: str | Path, *, max_rows: int = DEFAULT_MAX_ROWS,
                 timeout_s: float = DEFAULT_TIMEOUT_S) -> GuardedConnection:
    """Open the warehouse at ``path`` for guarded ad-hoc reads (a snapshot copy beside a running writer)."""
    from clonemem.warehouse.db import WarehouseError, connect_reader

    if max_rows < 1 or timeout_s <= 0:
        raise ValueError("max_rows must be >= 1 and timeout_s > 0")
    con, snapshot_dir = connect_reader(Path(path).expanduser().resolve(), _CONFIG)
    try:
        _lock_configuration(con)
    except duckdb.Error as exc:
        con.close()
        if snapshot_dir is not None:
            shutil.rmtree(snapshot_dir, ignore_errors=True)
        raise WarehouseError(f"cannot open warehouse {path}: {_first_line(exc)}") from None
    return GuardedConnection(con, Limits(max_rows, timeout_s), snapshot_dir)


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
