"""The guarded SQL surface (`clonemem sql`, the dashboard's reads): every escape route refused, the
warehouse bytes unchanged, no file written, the environment never printed."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clonemem.cli import app
from clonemem.warehouse.guard import SqlRefused, open_guarded
from tests.cli_kit import command_built_once  # noqa: F401  # a fixture

runner = CliRunner()
SECRET = "sk-test-guard-0123456789"

# Each probe: the issue's, then known DuckDB routes to files, the network, extensions, settings,
# logging and secrets. `{d}` is a scratch folder that must stay empty.
PROBES = [
    "EXPLAIN ANALYZE COPY (SELECT 'echo pwned' AS l) TO '{d}/evil.sh' (HEADER false, QUOTE '')",
    "EXPLAIN ANALYZE COPY (SELECT 1) TO '{wh}'",
    "EXPLAIN (ANALYZE) COPY (SELECT 1) TO '{d}/evil.csv'",
    "EXPLAIN (FORMAT json, ANALYZE) CREATE TEMP TABLE t AS SELECT 1",
    "EXPLAIN ANALYZE CREATE TEMP TABLE t AS SELECT 1",
    "EXPLAIN COPY (SELECT 1) TO '{d}/x.csv'",
    "CALL enable_logging(storage='file', storage_path='{d}/logs')",
    "SELECT * FROM enable_logging(storage='file', storage_path='{d}/logs')",
    "SELECT * FROM read_text('/proc/self/environ')",
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM read_csv_auto('/etc/passwd', sep=':')",
    "SELECT * FROM read_text('http://127.0.0.1:9/x')",
    "SELECT * FROM read_parquet('https://127.0.0.1:9/x.parquet')",
    "PRAGMA create_fts_index('traces', 'trace_id', 'content')",
    "SELECT * FROM read_parquet('{d}/x.parquet')",
    "SELECT * FROM parquet_metadata('{d}/x.parquet')",
    "SELECT * FROM parquet_schema('{d}/x.parquet')",
    "SELECT * FROM read_json('/etc/hostname')",
    "SELECT * FROM read_json_auto('/etc/hostname')",
    "SELECT * FROM read_ndjson_objects('/etc/hostname')",
    "SELECT * FROM glob('/etc/*')",
    "SELECT * FROM read_blob('/proc/self/environ')",
    "SELECT * FROM sniff_csv('/etc/passwd')",
    "SELECT * FROM '/etc/passwd'",
    "SELECT * FROM read_xlsx('{d}/x.xlsx')",
    "SELECT * FROM sqlite_scan('{d}/x.db', 't')",
    "COPY traces TO '{d}/t.csv'",
    "COPY (SELECT 1) TO '{wh}'",
    "COPY traces FROM '/etc/passwd'",
    "EXPORT DATABASE '{d}/export'",
    "IMPORT DATABASE '{d}'",
    "ATTACH '{d}/other.duckdb' AS o",
    "ATTACH ':memory:' AS m",
    "DETACH w",
    "INSTALL fts",
    "LOAD fts",
    "FORCE INSTALL httpfs",
    "LOAD '{d}/x.duckdb_extension'",
    "SET enable_external_access = true",
    "RESET enable_external_access",
    "SET lock_configuration = false",
    "SET autoinstall_known_extensions = true",
    "SET allowed_directories = ['/']",
    "SET memory_limit = '100GB'",
    "PRAGMA threads = 64",
    "PRAGMA enable_profiling",
    "SET profiling_output = '{d}/profile.json'",
    "SET VARIABLE x = 1",
    "CREATE SECRET s (TYPE s3, KEY_ID 'a', SECRET 'b')",
    "CREATE PERSISTENT SECRET s (TYPE s3, KEY_ID 'a', SECRET 'b')",
    "SELECT * FROM duckdb_secrets()",
    "SELECT * FROM which_secret('s3://bucket/x', 's3')",
    "SELECT getenv('CLONEMEM_TEST_SECRET')",
    "SELECT * FROM query('COPY (SELECT 1) TO ''{d}/q.csv''')",
    "CREATE TEMP TABLE t AS SELECT 1",
    "CREATE TABLE t (x INT)",
    "CREATE MACRO m() AS 1",
    "DELETE FROM traces",
    "UPDATE traces SET content = ''",
    "INSERT INTO traces SELECT * FROM traces",
    "DROP TABLE traces",
    "ALTER TABLE traces ADD COLUMN y INT",
    "CHECKPOINT",
    "FORCE CHECKPOINT",
    "VACUUM",
    "USE memory",
    "BEGIN TRANSACTION",
    "SELECT 1; DELETE FROM traces",
    "PIVOT traces ON medium",
]


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


pytestmark = pytest.mark.usefixtures("command_built_once")


@pytest.fixture(scope="module")
def imported_once(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo release imported directly (no Prefect flow: this file tests reading, not importing)."""
    from clonemem.demo import fixture_files
    from clonemem.importers import import_files
    from clonemem.warehouse import Warehouse

    wh = tmp_path_factory.mktemp("guard") / "wh.duckdb"
    with Warehouse.open_writer(wh) as w:
        import_files(w, "release", [fixture_files()[0]], "X")
    return wh


@pytest.fixture
def imported(imported_once: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh copy of the imported warehouse per probe (a probe that got through must not hide another)."""
    wh = tmp_path / "wh.duckdb"
    shutil.copyfile(imported_once, wh)
    monkeypatch.setenv("CLONEMEM_TEST_SECRET", SECRET)
    return wh


@pytest.mark.parametrize("probe", PROBES)
def test_escape_route_is_refused(imported: Path, tmp_path: Path, probe: str) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    sql = probe.format(d=scratch, wh=imported)
    before = _sha(imported)
    cwd = Path.cwd()
    os.chdir(scratch)  # a relative target would land here
    try:
        got = runner.invoke(app, ["--warehouse", str(imported), "sql", sql])
    finally:
        os.chdir(cwd)
    assert got.exit_code == 1, f"{probe!r} ran: {got.output}"
    lines = [line for line in got.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), got.output
    assert "Traceback" not in got.output and SECRET not in got.output and "PATH=" not in got.output
    assert _sha(imported) == before
    assert list(scratch.iterdir()) == []
    assert not imported.with_name("wh.duckdb.wal").exists()


def test_locked_settings_hold_even_without_the_statement_check(
    imported: Path, tmp_path: Path
) -> None:
    """The statement check is only the second line: DuckDB's own locked settings refuse on their own."""
    before, files = _sha(imported), sorted(p.name for p in tmp_path.iterdir())
    with open_guarded(imported) as con:
        raw = con._con
        for sql in (
            f"COPY (SELECT 1) TO '{tmp_path}/x.csv'",
            "SELECT * FROM read_text('/proc/self/environ')",
            "SET enable_external_access = true",
            "CALL enable_logging()",
            "LOAD fts",
            f"ATTACH '{tmp_path}/o.duckdb'",
            "DELETE FROM traces",
            "SET lock_configuration = false",
            "SELECT * FROM read_text('http://127.0.0.1:9/')",
            f"EXPORT DATABASE '{tmp_path}/e'",
        ):
            with pytest.raises(Exception) as info:
                raw.execute(sql).fetchall()
            assert SECRET not in str(info.value)
        assert raw.execute(
            "SELECT current_setting('enable_external_access'), current_setting('lock_configuration'),"
            " current_setting('autoinstall_known_extensions')"
        ).fetchone() == (False, True, False)
    assert _sha(imported) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == files  # none of x.csv, o.duckdb, e written


def test_queries_still_work_with_limits(imported: Path) -> None:
    with open_guarded(imported, max_rows=3, timeout_s=30) as con:
        (r,) = con.query("SELECT * FROM range(10)")
        assert r.rows == [(0,), (1,), (2,)] and r.truncated
        (r,) = con.query("WITH t AS (SELECT medium FROM traces) SELECT count(*) FROM t")
        assert r.rows == [(16,)] and not r.truncated
        assert con.query("DESCRIBE traces")[0].rows
        assert con.query("SHOW TABLES")[0].rows
        assert con.query("EXPLAIN SELECT * FROM traces")[0].rows
        assert con.frame("SELECT name, status FROM v_benchmarks").to_dicts() == [
            {"name": "X", "status": "complete"}
        ]


def test_time_limit_interrupts_a_long_query(imported: Path) -> None:
    with open_guarded(imported, timeout_s=0.5) as con:
        with pytest.raises(SqlRefused, match="time limit"):
            con.query("SELECT count(*) FROM range(100000000000) a, range(10) b")
        assert con.query("SELECT 42")[0].rows == [(42,)]  # the connection survives the interrupt


def test_cli_row_limit_and_time_limit(imported: Path) -> None:
    got = runner.invoke(
        app, ["--warehouse", str(imported), "sql", "SELECT * FROM range(50)", "--max-rows", "2"]
    )
    assert got.exit_code == 0 and "(2 rows, cut at the row limit)" in got.output
    got = runner.invoke(
        app,
        [
            "--warehouse",
            str(imported),
            "sql",
            "SELECT count(*) FROM range(100000000000) a",
            "--timeout",
            "0.5",
        ],
    )
    assert got.exit_code == 1 and "time limit" in got.output
