"""One writer at a time, readers never see half a benchmark as complete, the loser gets one clean line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from clonemem.warehouse.lock import lock_path, read_holder, writer_lock
from tests.pipeline_kit import EXE, clonemem, env_for, start, tiny_config

HOLD = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from clonemem.warehouse.lock import writer_lock
    with writer_lock(Path(sys.argv[1]), command="clonemem generate"):
        print("held", flush=True)
        sys.stdin.readline()
""")


def _holder(wh: Path) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(wh)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout.readline().strip() == "held"
    return proc


@pytest.mark.slow  # console-script runs, each starting its own Prefect server
def test_a_second_writer_gets_one_clean_line(tmp_path: Path, demo_file: Path) -> None:
    wh = tmp_path / "wh.duckdb"
    holder = _holder(wh)
    try:
        got = clonemem(
            wh, tmp_path / "home", "--wait", "0", "import", "release", str(demo_file), "--name", "X"
        )
        assert got.returncode == 75
        lines = [line for line in got.stderr.splitlines() if line.strip()]
        assert len(lines) == 1, got.stderr
        assert lines[0].startswith(
            f"error: warehouse {wh} is being written by PID {holder.pid} (`clonemem generate`"
        )
        assert "try again" in lines[0]
        assert not wh.exists()  # nothing was created or half-written
    finally:
        holder.stdin.write("\n")
        holder.stdin.flush()
        holder.wait(timeout=30)


@pytest.mark.slow  # console-script runs, each starting its own Prefect server
def test_a_waiting_writer_says_so_and_proceeds_when_free(tmp_path: Path, demo_file: Path) -> None:
    wh = tmp_path / "wh.duckdb"
    holder = _holder(wh)
    proc = start(
        wh, tmp_path / "home", "--wait", "120", "import", "release", str(demo_file), "--name", "X"
    )
    waiting = proc.stderr.readline()  # blocks until the writer reports that it waits
    assert waiting.startswith(
        f"warehouse is being written by PID {holder.pid} (`clonemem generate`, started at "
    )
    assert "waiting up to 120 s" in waiting and proc.poll() is None
    holder.stdin.write("\n")
    holder.stdin.flush()
    holder.wait(timeout=30)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "imported benchmark 'X'" in out


def test_stale_lock_of_a_dead_process_is_taken_over(tmp_path: Path) -> None:
    wh = tmp_path / "wh.duckdb"
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(wh)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout.readline().strip() == "held"
    proc.kill()  # SIGKILL: its lock file still names it
    proc.wait()
    assert read_holder(wh).pid == proc.pid
    with writer_lock(wh, wait_s=0):
        assert read_holder(wh).pid == os.getpid()
    assert lock_path(wh).exists()


def test_lock_is_reentrant_in_one_process_and_exclusive_across(tmp_path: Path) -> None:
    wh = tmp_path / "wh.duckdb"
    with writer_lock(wh, wait_s=0), writer_lock(wh, wait_s=0):
        other = subprocess.run(
            [
                sys.executable,
                "-c",
                textwrap.dedent(f"""
            from pathlib import Path
            from clonemem.warehouse.lock import WarehouseBusy, writer_lock
            try:
                with writer_lock(Path({str(wh)!r}), wait_s=0.5):
                    print("got it")
            except WarehouseBusy as exc:
                print("busy:", exc)
        """),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert other.stdout.startswith("busy:") and f"PID {os.getpid()}" in other.stdout
    assert read_holder(wh) is None  # released: the file no longer names a holder


@pytest.mark.slow  # console-script runs, each starting its own Prefect server
def test_a_writer_waits_for_a_long_reader(tmp_path: Path, demo_file: Path) -> None:
    """A write started during a long read (DuckDB's own file lock) waits instead of failing with a traceback."""
    wh = tmp_path / "wh.duckdb"
    assert (
        clonemem(
            wh, tmp_path / "home", "import", "release", str(demo_file), "--name", "X"
        ).returncode
        == 0
    )
    reader = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
        import sys, duckdb
        con = duckdb.connect({str(wh)!r}, read_only=True)
        print("reading", flush=True)
        sys.stdin.readline()
    """),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert reader.stdout.readline().strip() == "reading"
    writer = start(
        wh, tmp_path / "home", "--wait", "120", "import", "release", str(demo_file), "--name", "Y"
    )
    waiting = writer.stderr.readline()  # blocks until the writer reports that it waits
    assert "is being read by another process; waiting" in waiting and writer.poll() is None
    reader.stdin.write("\n")
    reader.stdin.flush()
    reader.wait(timeout=30)
    out, err = writer.communicate(timeout=120)
    assert writer.returncode == 0, err
    assert "Traceback" not in err and "imported benchmark 'Y'" in out


@pytest.mark.slow
@pytest.mark.ci
@pytest.mark.prefect
@pytest.mark.timeout(1200)
def test_two_writers_and_a_reader_at_once(tmp_path: Path) -> None:
    """Two `generate` runs of the same benchmark and a reader polling throughout: one writer waits for the
    other, both succeed, and the reader never lists the benchmark as complete before all of it is there."""
    wh = tmp_path / "wh.duckdb"
    cfg = tiny_config(tmp_path)
    first = start(wh, tmp_path / "home-a", "generate", "--config", str(cfg))
    time.sleep(1)
    second = start(wh, tmp_path / "home-b", "generate", "--config", str(cfg))
    seen: list[dict] = []
    while first.poll() is None or second.poll() is None:
        got = subprocess.run(
            [EXE, "--warehouse", str(wh), "benchmarks", "--json"],
            env=env_for(tmp_path / "home-r"),
            capture_output=True,
            text=True,
            timeout=120,
        )
        if got.returncode == 0:
            seen += json.loads(got.stdout)
        else:
            # only before the first writer has set the schema up
            early = ("no warehouse at", "is not a clonemem warehouse yet")
            assert any(line in got.stderr for line in early), got.stderr
        time.sleep(0.5)
    outs = [p.communicate() for p in (first, second)]
    assert [p.returncode for p in (first, second)] == [0, 0], outs
    errs = "".join(e for _, e in outs)
    assert "is being written by PID" in errs and "Traceback" not in errs and "ERROR" not in errs
    final = json.loads(clonemem(wh, tmp_path / "home-r", "benchmarks", "--json").stdout)
    assert [b["status"] for b in final] == ["complete"] and final[0]["questions"] > 0
    # whenever a reader saw it listed (as complete), it saw all of it
    assert all(b == final[0] for b in seen), seen
