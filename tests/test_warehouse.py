"""Versioned DDL, idempotent upserts, read-only readers."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import duckdb
import pytest

from clonemem.warehouse import Warehouse, WarehouseError
from clonemem.warehouse.migrate import MigrationError, apply_migrations, available_migrations


def test_migrations_apply_once(wh_path: Path) -> None:
    with Warehouse.open_writer(wh_path) as wh:
        versions = [r[0] for r in wh.rows("SELECT version FROM schema_migrations ORDER BY version")]
        assert versions == [m.version for m in available_migrations()]
        assert apply_migrations(wh.con) == []
    with Warehouse.open_writer(wh_path) as wh:
        assert wh.scalar("SELECT count(*) FROM schema_migrations") == len(versions)


def test_edited_migration_is_detected(wh_path: Path) -> None:
    Warehouse.open_writer(wh_path).close()
    con = duckdb.connect(str(wh_path))
    con.execute("UPDATE schema_migrations SET checksum = 'x' WHERE version = 1")
    with pytest.raises(MigrationError, match="0001_core.sql changed after it was applied"):
        apply_migrations(con)
    con.close()


def _schema_of(path: Path) -> tuple[list, list, list]:
    with Warehouse.open_writer(path) as wh:
        return (
            wh.rows("SELECT version, name, checksum FROM schema_migrations ORDER BY 1"),
            wh.rows("SELECT name, checksum FROM schema_views ORDER BY 1"),
            wh.rows(
                "SELECT table_name, column_name, data_type FROM information_schema.columns "
                "WHERE table_schema = 'main' ORDER BY 1, ordinal_position"
            ),
        )


def test_new_warehouses_of_a_process_have_the_schema_its_files_define(
    monkeypatch, tmp_path: Path
) -> None:
    """From a process's second new warehouse on, a new file is a copy of an empty warehouse it made once:
    each copy has every migration and view and the same tables as a file migrated in place, and a schema
    whose files differ (one view fewer here) gets an empty warehouse of its own."""
    from clonemem.warehouse import migrate, scratch

    in_place = tmp_path / "in-place.duckdb"
    con = duckdb.connect(str(in_place))
    migrate.apply_schema(con)
    con.close()
    expected = _schema_of(in_place)
    assert expected[0] and expected[1] and expected[2]
    copies = [_schema_of(tmp_path / f"new-{i}.duckdb") for i in range(3)]
    assert copies == [expected] * 3
    made = sorted(scratch.base().glob(f"{scratch.SCHEMA}-{os.getpid()}-*/empty.duckdb"))
    assert made, "no empty warehouse was made to copy"
    views = migrate.available_views()
    monkeypatch.setattr(migrate, "available_views", lambda: views[:-1])
    fewer = [_schema_of(tmp_path / f"fewer-{i}.duckdb") for i in range(2)]
    assert fewer[0][1] == expected[1][:-1] and fewer[0][0] == expected[0]
    assert fewer[1] == fewer[0]
    assert (
        len(sorted(scratch.base().glob(f"{scratch.SCHEMA}-{os.getpid()}-*/empty.duckdb")))
        == len(made) + 1
    )
    assert not list(tmp_path.glob(".*.part"))  # nothing half-copied left beside them

    # a copy that cannot be written is one line naming the file, and leaves no file but the lock behind
    def full_disk(*_args: object, **_kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(shutil, "copyfile", full_disk)
    with pytest.raises(
        WarehouseError, match=r"cannot create warehouse .*full\.duckdb: No space left on device$"
    ):
        Warehouse.open_writer(tmp_path / "full.duckdb")
    assert not list(tmp_path.glob("*full.duckdb*[!k]"))  # neither the file nor a part of it


def test_upsert_is_idempotent(wh: Warehouse) -> None:
    row = {"benchmark_id": "b", "name": "n", "source": "imported", "is_offline": False}
    wh.upsert("benchmarks", [row])
    wh.upsert("benchmarks", [row])
    wh.upsert("benchmarks", [{**row, "name": "renamed"}])
    assert wh.rows("SELECT benchmark_id, name FROM benchmarks") == [("b", "renamed")]


def test_reader_is_read_only(wh_path: Path) -> None:
    Warehouse.open_writer(wh_path).close()
    with Warehouse.open_reader(wh_path) as reader:
        with pytest.raises(WarehouseError, match="read-only"):
            reader.upsert(
                "benchmarks",
                [{"benchmark_id": "b", "name": "n", "source": "imported", "is_offline": False}],
            )
        with pytest.raises(duckdb.Error):
            reader.con.execute("DELETE FROM benchmarks")


def test_reader_beside_a_writer_reads_a_snapshot(wh_path: Path, tmp_path: Path) -> None:
    import subprocess
    import sys
    import textwrap

    # A writer in another process holds DuckDB's file lock; the reader falls back to a snapshot copy.
    script = textwrap.dedent(f"""
        import sys, time
        from clonemem.warehouse import Warehouse
        wh = Warehouse.open_writer({str(wh_path)!r})
        wh.upsert("benchmarks", [{{"benchmark_id": "b", "name": "n", "source": "imported", "is_offline": False}}])
        wh.con.execute("CHECKPOINT")
        print("ready", flush=True)
        sys.stdin.readline()
    """)
    proc = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout.readline().strip() == "ready"
        with Warehouse.open_reader(wh_path) as reader:
            assert reader.rows("SELECT name FROM benchmarks") == [("n",)]
    finally:
        proc.stdin.write("\n")
        proc.stdin.flush()
        proc.wait(timeout=30)


def test_views_live_in_files_and_follow_their_file(wh_path: Path) -> None:
    from clonemem.warehouse.migrate import View, apply_views, available_views

    views = available_views()
    assert {v.name for v in views} >= {
        "v_benchmarks",
        "v_question_composition",
        "v_trace_media",
        "v_llm_spend",
    }
    with Warehouse.open_writer(wh_path) as wh:
        present = {r[0] for r in wh.rows("SELECT view_name FROM duckdb_views() WHERE NOT internal")}
        assert {v.name for v in views} <= present
        assert apply_views(wh.con) == []  # unchanged files: nothing re-applied
        edited = [
            View(v.name, v.sql.replace("AS traces", "AS trace_count"))
            if v.name == "v_trace_media"
            else v
            for v in views
        ]
        assert apply_views(wh.con, edited) == ["v_trace_media"]
        assert "trace_count" in [r[0] for r in wh.rows("DESCRIBE v_trace_media")]
        wh.con.execute(
            "DROP VIEW v_llm_spend"
        )  # a view dropped by hand comes back on the next open
    with Warehouse.open_writer(wh_path) as wh:
        assert wh.scalar("SELECT count(*) FROM duckdb_views() WHERE view_name = 'v_llm_spend'") == 1
        assert "traces" in [
            r[0] for r in wh.rows("DESCRIBE v_trace_media")
        ]  # the file is the truth again


def test_a_view_file_must_define_the_view_it_is_named_after(monkeypatch, tmp_path: Path) -> None:
    from clonemem.warehouse import migrate

    folder = tmp_path / "views"
    folder.mkdir()
    (folder / "v_x.sql").write_text("CREATE OR REPLACE VIEW v_y AS SELECT 1 AS one;\n", "utf-8")

    class Root:
        def __truediv__(self, name: str) -> Path:
            return tmp_path / name

    monkeypatch.setattr(migrate.resources, "files", lambda _pkg: Root())
    with pytest.raises(
        MigrationError, match=r"views/v_x.sql must define exactly one view named 'v_x'.*found: v_y"
    ):
        migrate.available_views()


def _older_warehouse(path: Path, below: int) -> duckdb.DuckDBPyConnection:
    """A connection to a new warehouse file with only the migrations numbered below ``below`` applied,
    as an older release left it."""
    from clonemem.warehouse import migrate

    every = migrate.available_migrations()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            migrate, "available_migrations", lambda: [m for m in every if m.version < below]
        )
        con = duckdb.connect(str(path))
        apply_migrations(con)
    return con


def test_per_question_metrics_are_a_column_each_and_old_rows_keep_their_long_view(
    tmp_path: Path,
) -> None:
    """Migration 0012: a warehouse written with the long table (a row per metric) reads the same through
    the view after the upgrade, and the wide table has exactly the aggregated metrics as columns."""
    from clonemem.schemas.results import AGGREGATED

    path = tmp_path / "old.duckdb"
    con = _older_warehouse(path, 12)
    old = [
        ("e1", "bm25", 5, "q1", "recall_flat", 0.5),
        ("e1", "bm25", 5, "q1", "choice_accuracy", None),
        ("e1", "bm25", 5, "q2", "recall_flat", 1.0),
        ("e1", "dense", 10, "q1", "correct", 1.0),
    ]
    con.executemany("INSERT INTO eval_question_metrics VALUES (?, ?, ?, ?, ?, ?)", old)
    con.close()
    with Warehouse.open_writer(path) as wh:
        described = [r[0] for r in wh.rows("DESCRIBE eval_question_scores")]
        assert described == ["eval_run_id", "system", "k", "question_id", *AGGREGATED]
        got = wh.rows(
            "SELECT * FROM eval_question_metrics WHERE value IS NOT NULL OR metric = 'choice_accuracy' "
            "ORDER BY ALL"
        )
        assert sorted(got, key=str) == sorted(
            [r for r in old if r[5] is not None]
            + [
                ("e1", "bm25", 5, "q2", "choice_accuracy", None),
                ("e1", "dense", 10, "q1", "choice_accuracy", None),
                ("e1", "bm25", 5, "q1", "choice_accuracy", None),
            ],
            key=str,
        )
        # every metric of every (run, system, k, question) is a row of the view, NULL where not computed
        assert wh.scalar("SELECT count(*) FROM eval_question_metrics") == 3 * len(AGGREGATED)


def test_pending_migrations_and_views_land_in_one_transaction(monkeypatch, tmp_path: Path) -> None:
    """A reader copies the file at any moment, so an upgrade is all or nothing: a migration that fails
    after others were pending leaves none of them (and no view) applied."""
    from clonemem.warehouse import migrate

    path = tmp_path / "old.duckdb"
    con = _older_warehouse(path, 20)
    views = "SELECT view_name FROM duckdb_views() WHERE NOT internal ORDER BY ALL"
    before = con.execute(views).fetchall()
    every = migrate.available_migrations()
    broken = migrate.Migration(every[-1].version + 1, "broken", "SELECT * FROM no_such_table;")
    monkeypatch.setattr(migrate, "available_migrations", lambda: [*every, broken])
    with pytest.raises(MigrationError, match=f"{broken.version:04d}_broken.sql failed"):
        migrate.apply_schema(con)
    assert con.execute("SELECT max(version) FROM schema_migrations").fetchone() == (19,)
    assert con.execute(views).fetchall() == before
    con.close()


def test_a_reader_refuses_a_file_without_the_schema_it_reads(tmp_path: Path) -> None:
    """An empty file (a first writer still setting it up), an older schema and a newer one each get a
    line that says so, never a DuckDB binder error from deep inside a query."""
    from clonemem.warehouse import migrate

    empty = tmp_path / "empty.duckdb"
    duckdb.connect(str(empty)).close()
    with pytest.raises(
        WarehouseError,
        match=r"empty.duckdb is not a clonemem warehouse yet: it has no clonemem schema",
    ):
        Warehouse.open_reader(empty)

    old = tmp_path / "old.duckdb"
    _older_warehouse(old, 20).close()
    latest = migrate.latest_version()
    with pytest.raises(
        WarehouseError, match=f"has schema version 19; this clonemem reads version {latest}"
    ):
        Warehouse.open_reader(old)
    Warehouse.open_writer(old).close()  # a writer brings it up to date
    with Warehouse.open_reader(old) as wh:
        assert wh.scalar("SELECT count(*) FROM v_benchmarks") == 0

    con = duckdb.connect(str(old))
    con.execute(
        "INSERT INTO schema_migrations (version, name, checksum) VALUES (?, 'x', 'x')", [latest + 1]
    )
    con.close()
    with pytest.raises(WarehouseError, match=f"has schema version {latest + 1}, made by a newer"):
        Warehouse.open_reader(old)
