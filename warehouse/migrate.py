"""Versioned DDL: ``ddl/NNNN_name.sql`` files applied once each, in order, each in a transaction."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources

import duckdb


class MigrationError(RuntimeError):
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
            found.append(Migration(int(version), rest.removesuffix(".sql"), entry.read_text("utf-8")))
    return sorted(found, key=lambda m: m.version)


def apply_migrations(con: duckdb.DuckDBPyConnection) -> list[int]:
    """Apply every migration not yet recorded; returns the versions applied now."""
    con.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        " version INTEGER PRIMARY KEY, name VARCHAR NOT NULL, checksum VARCHAR NOT NULL,"
        " applied_at TIMESTAMP NOT NULL DEFAULT current_timestamp)"
    )
    applied = {v: c for v, c in con.execute("SELECT version, checksum FROM schema_migrations").fetchall()}
    done = []
    for mig in available_migrations():
        if mig.version in applied:
            if applied[mig.version] != mig.checksum:
                raise MigrationError(
                    f"migration {mig.version:04d}_{mig.name}.sql changed after it was applied; "
                    "add a new migration instead of editing an applied one"
                )
            continue
        con.execute("BEGIN TRANSACTION")
        try:
            con.execute(mig.sql)
            con.execute(
                "INSERT INTO schema_migrations (version, name, checksum) VALUES (?, ?, ?)",
                [mig.version, mig.name, mig.checksum],
            )
        except duckdb.Error as exc:
            con.execute("ROLLBACK")
            raise MigrationError(f"migration {mig.version:04d}_{mig.name}.sql failed: {exc}") from exc
        con.execute("COMMIT")
        done.append(mig.version)
    return done
