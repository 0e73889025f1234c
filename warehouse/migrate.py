"""Schema: versioned DDL and view files.

Tables change through ``ddl/NNNN_name.sql`` migrations, applied once each, in order (an applied
migration is never edited). Views are not history but the current answer to
a question, so each lives in one file ``views/<view name>.sql`` (``CREATE OR REPLACE VIEW``) that is
edited in place: a writer re-creates a view whenever its file differs from the one last applied.
Views are applied after all migrations, in file-name order. A writer applies what is pending, migrations
and views together, in one transaction (:func:`apply_schema`); a reader refuses a file whose schema is
not the one this code knows (:func:`schema_version`).
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources

import duckdb

from clonemem.errors import UserError


class MigrationError(RuntimeError, UserError):
    """An applied migration whose file has since changed, or a migration that failed."""


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode("utf-8")).hexdigest()


def available_migrations() -> list[Migration]:
    ddl = resources.files("clonemem.warehouse") / "ddl"
    found = []
    for entry in ddl.iterdir():
        if entry.name.endswith(".sql"):
            version, _, rest = entry.name.partition("_")
            found.append(
                Migration(int(version), rest.removesuffix(".sql"), entry.read_text("utf-8"))
            )
    return sorted(found, key=lambda m: m.version)


@functools.cache
def latest_version() -> int:
    """The schema version this code writes and reads: its newest migration."""
    return max(m.version for m in available_migrations())


def schema_key() -> str:
    """The schema this code's files define (every migration and view, by checksum), as one hash."""
    parts = [f"{m.version}:{m.checksum}" for m in available_migrations()]
    parts += [f"{v.name}:{v.checksum}" for v in available_views()]
    return hashlib.sha256("\n".join(parts).encode("utf-8")).hexdigest()[:16]


def apply_schema(con: duckdb.DuckDBPyConnection) -> tuple[list[int], list[str]]:
    """Every pending migration and every changed view in one transaction; returns what was applied.

    One transaction because readers copy the file at any moment (a snapshot beside a writer): they must
    see the schema before the upgrade or after it, never a table of one version with views of another.
    """
    con.execute("BEGIN TRANSACTION")
    try:
        done = apply_migrations(con, in_transaction=True)
        views = apply_views(con, in_transaction=True)
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")
    return done, views


def apply_migrations(con: duckdb.DuckDBPyConnection, *, in_transaction: bool = False) -> list[int]:
    """Apply every migration not yet recorded (each in a transaction of its own, unless the caller
    holds one: :func:`apply_schema`); returns the versions applied now."""
    con.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        " version INTEGER PRIMARY KEY, name VARCHAR NOT NULL, checksum VARCHAR NOT NULL,"
        " applied_at TIMESTAMP NOT NULL DEFAULT current_timestamp)"
    )
    applied = {
        v: c for v, c in con.execute("SELECT version, checksum FROM schema_migrations").fetchall()
    }
    done = []
    for mig in available_migrations():
        if mig.version in applied:
            if applied[mig.version] != mig.checksum:
                raise MigrationError(
                    f"migration {mig.version:04d}_{mig.name}.sql changed after it was applied; "
                    "add a new migration instead of editing an applied one"
                )
            continue
        with _step(con, in_transaction, f"migration {mig.version:04d}_{mig.name}.sql failed"):
            con.execute(mig.sql)
            con.execute(
                "INSERT INTO schema_migrations (version, name, checksum) VALUES (?, ?, ?)",
                [mig.version, mig.name, mig.checksum],
            )
        done.append(mig.version)
    return done


def schema_version(con: duckdb.DuckDBPyConnection) -> int | None:
    """The newest migration applied to the file ``con`` reads (0 for none), or None when the file has no
    clonemem schema at all. Asked of the table itself: a file without it raises a catalog error, at once
    (listing ``duckdb_tables()`` first took 18 ms of every reader's opening)."""
    try:
        got = con.execute("SELECT max(version) FROM main.schema_migrations").fetchall()[0][0]
    except duckdb.CatalogException:
        return None
    return 0 if got is None else int(got)


@contextmanager
def _step(con: duckdb.DuckDBPyConnection, in_transaction: bool, failed: str) -> Iterator[None]:
    """One schema change: in a transaction of its own, or in the caller's; a DuckDB error named."""
    if not in_transaction:
        con.execute("BEGIN TRANSACTION")
    try:
        yield
    except duckdb.Error as exc:
        if not in_transaction:
            con.execute("ROLLBACK")
        raise MigrationError(f"{failed}: {exc}") from exc
    if not in_transaction:
        con.execute("COMMIT")


# -- views ---------------------------------------------------------------------------------------

_VIEW_HEAD = re.compile(
    r"^\s*CREATE\s+OR\s+REPLACE\s+VIEW\s+([A-Za-z_][A-Za-z0-9_]*)\s+AS\b", re.I | re.M
)


@dataclass(frozen=True)
class View:
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode("utf-8")).hexdigest()


def available_views() -> list[View]:
    folder = resources.files("clonemem.warehouse") / "views"
    found = []
    for entry in folder.iterdir():
        if entry.name.endswith(".sql"):
            name, sql = entry.name.removesuffix(".sql"), entry.read_text("utf-8")
            heads = _VIEW_HEAD.findall(sql)
            if heads != [name]:  # one file, one view, named after its file: the folder is the index
                raise MigrationError(
                    f"views/{entry.name} must define exactly one view named {name!r} "
                    f"with CREATE OR REPLACE VIEW (found: {', '.join(heads) or 'none'})"
                )
            found.append(View(name, sql))
    return sorted(found, key=lambda v: v.name)


def apply_views(
    con: duckdb.DuckDBPyConnection, views: list[View] | None = None, *, in_transaction: bool = False
) -> list[str]:
    """(Re)create every view whose file changed since it was last applied; returns their names."""
    con.execute(
        "CREATE TABLE IF NOT EXISTS schema_views ("
        " name VARCHAR PRIMARY KEY, checksum VARCHAR NOT NULL,"
        " applied_at TIMESTAMP NOT NULL DEFAULT current_timestamp)"
    )
    applied = dict(con.execute("SELECT name, checksum FROM schema_views").fetchall())
    existing = {
        r[0]
        for r in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()
    }
    done = []
    for view in available_views() if views is None else views:
        if applied.get(view.name) == view.checksum and view.name in existing:
            continue
        with _step(con, in_transaction, f"view file views/{view.name}.sql failed"):
            con.execute(view.sql)
            con.execute(
                "INSERT OR REPLACE INTO schema_views (name, checksum, applied_at) VALUES (?, ?, current_timestamp)",
                [view.name, view.checksum],
            )
        done.append(view.name)
    return done
