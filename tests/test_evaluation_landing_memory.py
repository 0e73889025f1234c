"""The evaluation's landing in a bulk writer (issue: the first evaluation's peak memory): its rows reach the
warehouse file as they land instead of waiting in DuckDB's memory for the commit, and the landing stays one
transaction. The memory itself is measured in `benchmarks/evaluate_scale.py`, not here."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from clonemem.warehouse import Warehouse

ROWS = 10_000  # several of a bulk writer's row groups (2,048 rows)


def _table(path: Path) -> None:
    with Warehouse.open_writer(path) as wh:
        wh.execute("CREATE TABLE IF NOT EXISTS big (i INTEGER PRIMARY KEY, s VARCHAR)")


def _rows(start: int, n: int) -> list[dict]:
    return [
        {"i": i, "s": f"row {i}: " + " ".join(f"word{(i * 7 + j) % 997}" for j in range(60))}
        for i in range(start, start + n)
    ]


def _grows_before_commit(path: Path, bulk: bool) -> bool:
    with Warehouse.open_writer(path, bulk=bulk) as wh, wh.transaction():
        before = path.stat().st_size
        for start in range(0, ROWS, 1000):
            wh.insert("big", _rows(start + (ROWS if bulk else 0), 1000))
        return path.stat().st_size > before


def test_a_bulk_writer_puts_a_big_transactions_rows_in_the_file_before_the_commit(
    tmp_path: Path,
) -> None:
    path = tmp_path / "wh.duckdb"
    _table(path)
    assert not _grows_before_commit(
        path, bulk=False
    )  # a plain writer holds them in memory to the commit
    assert _grows_before_commit(path, bulk=True)
    with Warehouse.open_reader(path) as wh:
        assert wh.rows("SELECT count(*), count(DISTINCT i) FROM big") == [(2 * ROWS, 2 * ROWS)]
        assert wh.scalar("SELECT s FROM big WHERE i = ?", [ROWS + 3]) == _rows(ROWS + 3, 1)[0]["s"]


def test_a_failed_bulk_transaction_leaves_nothing(tmp_path: Path) -> None:
    path = tmp_path / "wh.duckdb"
    _table(path)
    with (
        pytest.raises(RuntimeError, match="stop"),
        Warehouse.open_writer(path, bulk=True) as wh,
        wh.transaction(),
    ):
        for start in range(0, ROWS, 1000):
            wh.insert("big", _rows(start, 1000))
        raise RuntimeError("stop")  # after rows were written to the file
    with Warehouse.open_writer(path) as wh:
        assert wh.scalar("SELECT count(*) FROM big") == 0
        wh.insert("big", _rows(0, 10))  # the file is sound
        assert wh.scalar("SELECT count(*) FROM big") == 10


def test_a_bulk_writer_joins_a_connection_this_process_has_open(tmp_path: Path) -> None:
    path = tmp_path / "wh.duckdb"
    _table(path)
    with Warehouse.open_writer(path) as outer:
        outer.insert("big", _rows(0, 3))
        with Warehouse.open_writer(path, bulk=True) as inner:
            assert inner.scalar("SELECT count(*) FROM big") == 3
            inner.insert("big", _rows(3, 2))
        assert outer.scalar("SELECT count(*) FROM big") == 5


def test_another_writer_of_this_process_waits_for_a_bulk_writer(tmp_path: Path) -> None:
    path = tmp_path / "wh.duckdb"
    _table(path)
    opened, got = threading.Event(), {}

    def bulk() -> None:
        with Warehouse.open_writer(path, bulk=True) as wh:
            opened.set()
            time.sleep(1.0)
            wh.insert("big", _rows(0, 4))
            got["closed_at"] = time.monotonic()

    worker = threading.Thread(target=bulk)
    worker.start()
    assert opened.wait(10)
    with Warehouse.open_writer(
        path, wait_s=20
    ) as wh:  # the file is attached by the bulk writer meanwhile
        got["opened_at"] = time.monotonic()
        assert wh.scalar("SELECT count(*) FROM big") == 4
    worker.join()
    assert got["opened_at"] >= got["closed_at"]


@pytest.mark.prefect
def test_the_evaluation_lands_through_a_bulk_writer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from clonemem.demo import fixture_files
    from clonemem.flows.evaluation import evaluate_flow
    from clonemem.importers import import_files
    from clonemem.schemas.config import RunConfig

    path = tmp_path / "wh.duckdb"
    with Warehouse.open_writer(path) as wh:
        import_files(wh, "release", fixture_files(), "demo")
    opened: list[bool] = []
    real = Warehouse.open_writer.__func__  # type: ignore[attr-defined]

    def spy(cls: type[Warehouse], where: str | Path, **kw: object) -> Warehouse:
        opened.append(bool(kw.get("bulk")))
        return real(cls, where, **kw)

    monkeypatch.setattr(Warehouse, "open_writer", classmethod(spy))
    result = evaluate_flow(
        str(path), "demo", ["bm25", "random"], [1], force=True, config=RunConfig()
    )
    assert opened and opened[-1], opened  # the landing, the flow's last write
    with Warehouse.open_reader(path) as wh:
        stored = wh.scalar(
            "SELECT count(*) FROM llm_calls WHERE run_id = ? AND prompt_text IS NOT NULL",
            [result.eval_run_id],
        )
        assert stored and stored == wh.scalar(
            "SELECT count(*) FROM llm_calls WHERE run_id = ?", [result.eval_run_id]
        )


ARENAS_AFTER_THREADS = """
import ctypes, os, sys, tempfile, threading
if sys.argv[1] == "cli":
    import clonemem.cli  # noqa: F401  (what the `clonemem` command imports first)
held, together = [], threading.Barrier(8)
def work():  # eight threads alive at once (an ended thread's arena goes to the next one)
    held.append([bytearray(4096) for _ in range(64)])  # above pymalloc's limit: glibc's malloc, in this thread
    together.wait()
threads = [threading.Thread(target=work) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
libc = ctypes.CDLL("libc.so.6")
libc.fopen.restype = ctypes.c_void_p
out = tempfile.mktemp()
f = libc.fopen(out.encode(), b"w")
libc.malloc_info(0, ctypes.c_void_p(f))
libc.fclose(ctypes.c_void_p(f))
print(os.environ.get("DUCKDB_JE_MALLOC_CONF"), "duckdb" in sys.modules, "polars" in sys.modules)
print(open(out).read().count("<heap nr="))
"""


@pytest.mark.skipif(
    not Path("/lib/x86_64-linux-gnu/libc.so.6").exists() and not Path("/lib64/libc.so.6").exists(),
    reason="glibc only",
)
def test_the_command_line_keeps_glibc_to_two_arenas_and_has_jemalloc_return_pages_at_once(
    tmp_path: Path,
) -> None:
    import os
    import subprocess
    import sys

    from clonemem import allocator

    unset = ("MALLOC_ARENA_MAX", *allocator.JEMALLOC_VARIABLES)
    env = {k: v for k, v in os.environ.items() if k not in unset}

    def run(mode: str) -> list[str]:
        got = subprocess.run(
            [sys.executable, "-c", ARENAS_AFTER_THREADS, mode],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert got.returncode == 0, got.stderr
        return got.stdout.split()

    assert int(run("plain")[-1]) > 2  # threads get arenas of their own without the cap
    *jemalloc, arenas = run("cli")
    assert int(arenas) <= 2
    # set before DuckDB and polars load: their jemalloc reads it when it starts
    assert jemalloc == [allocator.RETURN_AT_ONCE, "False", "False"]
