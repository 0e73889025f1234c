"""The read-only SQL surface is bounded on disk too: a query spilling past the temp bound stops with one
line and leaves nothing behind; spill folders and snapshot copies live in the system's temporary folder
under the owner's pid, and the next reader removes those of a process that was killed."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clonemem.importers import import_files
from clonemem.warehouse import Warehouse, scratch
from tests.pipeline_kit import EXE, clonemem, env_for

# A sort of ~130 MB of incompressible strings: under 64 MB of memory it spills well past 16 MB.
SPILLING = "SELECT * FROM (SELECT range, md5(range::varchar) AS s FROM range(2000000)) ORDER BY s"
BOUNDS = ("--memory-limit", "64MB", "--temp-limit", "16MB")


@pytest.fixture
def warehouse(tmp_path: Path, demo_file: Path) -> Path:
    wh = tmp_path / "wh.duckdb"
    with Warehouse.open_writer(wh) as w:
        import_files(w, "release", [demo_file], "demo")
    return wh


@pytest.fixture
def tmpdir_(tmp_path: Path) -> Path:
    """The CLI's system temporary folder ($TMPDIR): this test's own, so other processes' scratch is not seen."""
    folder = tmp_path / "systmp"
    folder.mkdir()
    return folder


def _scratch(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("clonemem-"))


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _sql(wh: Path, tmp_path: Path, tmpdir_: Path, *args: str) -> subprocess.CompletedProcess:
    return clonemem(wh, tmp_path / "home", "sql", *args, timeout=180, TMPDIR=str(tmpdir_))


def test_a_query_over_the_temp_bound_fails_clearly_and_leaves_no_files(
    warehouse: Path, tmp_path: Path, tmpdir_: Path
) -> None:
    got = _sql(warehouse, tmp_path, tmpdir_, SPILLING, "--timeout", "120", *BOUNDS)
    assert got.returncode == 1, got.stderr
    lines = got.stderr.strip().splitlines()
    assert (
        len(lines) == 1
        and "spilled more than the SQL surface's 16MB of temporary space" in lines[0]
    ), got.stderr
    assert "--temp-limit" in lines[0]
    assert _scratch(tmpdir_) == []  # its spill folder went with it
    assert not warehouse.with_name(warehouse.name + ".tmp").exists()  # never beside the warehouse


def test_limits_are_configurable_and_checked(
    warehouse: Path, tmp_path: Path, tmpdir_: Path
) -> None:
    got = _sql(
        warehouse,
        tmp_path,
        tmpdir_,
        "SELECT current_setting('memory_limit'), "
        "current_setting('max_temp_directory_size'), current_setting('temp_directory')",
        "--format",
        "csv",
        "--memory-limit",
        "300MB",
    )
    assert got.returncode == 0, got.stderr
    memory, temp, folder = got.stdout.splitlines()[1].split(",")
    assert memory.startswith("286.1 MiB") and temp.startswith(
        "953.6 MiB"
    )  # 300 MB; the 1 GB default
    assert Path(folder).parent == tmpdir_ and Path(folder).name.startswith("clonemem-sqltmp-")
    got = clonemem(
        warehouse,
        tmp_path / "home",
        "sql",
        "SELECT 1",
        TMPDIR=str(tmpdir_),
        CLONEMEM_SQL_TEMP_LIMIT="lots",
    )
    assert got.returncode == 1 and got.stderr.strip() == (
        "error: $CLONEMEM_SQL_TEMP_LIMIT: 'lots' is not a size (write it like 512MB or 2GB)"
    )


def test_stale_scratch_of_a_dead_process_is_removed_by_the_next_sql(
    warehouse: Path, tmp_path: Path, tmpdir_: Path
) -> None:
    dead, alive = _dead_pid(), os.getpid()
    for name in (
        f"clonemem-sqltmp-{dead}-0123456789ab",
        f"clonemem-snapshot-{dead}-x1y2z3",
        f"clonemem-snapshot-{alive}-k4e5p6",
    ):
        (tmpdir_ / name).mkdir()
        (tmpdir_ / name / "payload").write_bytes(b"\0" * 4096)
    got = _sql(warehouse, tmp_path, tmpdir_, "SELECT 1")
    assert got.returncode == 0, got.stderr
    assert _scratch(tmpdir_) == [f"clonemem-snapshot-{alive}-k4e5p6"]  # a running owner's stays


HOLD = """
import sys
from pathlib import Path
from clonemem.warehouse.lock import writer_lock
with writer_lock(Path(sys.argv[1]), command="clonemem generate"):
    print("held", flush=True)
    sys.stdin.readline()
"""


def test_a_reader_killed_during_a_query_is_cleaned_up_by_the_next(
    warehouse: Path, tmp_path: Path, tmpdir_: Path
) -> None:
    """Beside a running writer a reader reads a snapshot copy; killed (-9) while spilling, it leaves the copy
    and its spill files in $TMPDIR, and the next `clonemem sql` removes them."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(warehouse)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        reader = subprocess.Popen(
            [
                EXE,
                "--warehouse",
                str(warehouse),
                "sql",
                SPILLING,
                "--timeout",
                "120",
                "--memory-limit",
                "64MB",
                "--temp-limit",
                "1GB",
            ],
            env=env_for(tmp_path / "home", TMPDIR=str(tmpdir_)),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 120
        spill = None
        while time.monotonic() < deadline and reader.poll() is None:
            spill = next(
                (p for p in tmpdir_.glob(f"clonemem-snapshot-{reader.pid}-*/spill/*.tmp")), None
            )
            if spill is not None:
                break
            time.sleep(0.05)
        assert spill is not None, "the reader never spilled into its snapshot's folder"
        reader.kill()
        reader.wait()
        left = _scratch(tmpdir_)
        assert left and all(name.startswith(f"clonemem-snapshot-{reader.pid}-") for name in left)

        got = _sql(
            warehouse, tmp_path, tmpdir_, "SELECT count(*) FROM personas"
        )  # the writer still holds it
        assert got.returncode == 0, got.stderr
        assert (
            _scratch(tmpdir_) == []
        )  # the dead reader's copy and this reader's own copy are both gone
    finally:
        holder.stdin.write("\n")
        holder.stdin.flush()
        holder.wait(timeout=30)


def test_snapshot_copies_carry_their_owner_and_go_on_close(
    warehouse: Path, tmpdir_: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tempfile

    from clonemem.warehouse.guard import open_guarded

    monkeypatch.setattr(tempfile, "tempdir", str(tmpdir_))
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(warehouse)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with Warehouse.open_reader(warehouse) as r, open_guarded(warehouse) as g:
            assert (
                r.rows("SELECT count(*) FROM personas")
                == g.query("SELECT count(*) FROM personas")[0].rows
            )
            assert g.is_snapshot
            names = _scratch(tmpdir_)
            assert len(names) == 2 and all(
                n.startswith(f"{scratch.SNAPSHOT}-{os.getpid()}-") for n in names
            )
        assert _scratch(tmpdir_) == []
    finally:
        holder.stdin.write("\n")
        holder.stdin.flush()
        holder.wait(timeout=30)
