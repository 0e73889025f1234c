"""Fault injection: a tiny pipeline (one persona) through the real CLI under provider faults, SIGKILLs at
a landing point of each stage, and a full disk. Marked `faults` (part of CI)."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from tests.pipeline_kit import clonemem, content, export, tiny_config

pytestmark = [pytest.mark.slow, pytest.mark.faults, pytest.mark.prefect, pytest.mark.timeout(1500)]

EVAL = ("evaluate", "tiny", "--systems", "bm25,random", "--k", "5")


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The uninterrupted, fault-free reference: generate, evaluate, export."""
    d = tmp_path_factory.mktemp("clean")
    wh, home = d / "wh.duckdb", d / "home"
    got = clonemem(wh, home, "generate", "--config", str(tiny_config(d)))
    assert got.returncode == 0, got.stderr
    ev = clonemem(wh, home, *EVAL, "--json", str(d / "eval.json"))
    assert ev.returncode == 0, ev.stderr
    return {
        "wh": wh,
        "home": home,
        "content": content(wh),
        "export": export(wh, home, d / "export"),
        "eval": _metrics(d / "eval.json"),
        "stderr": got.stderr + ev.stderr,
    }


def _metrics(path: Path) -> list[dict]:
    """The evaluation contract without timings (build seconds and latencies are wall-clock)."""
    drop = {"build_seconds", "retrieval_p50_ms", "retrieval_p95_ms"}
    return [
        {k: v for k, v in r.items() if k not in drop}
        for r in json.loads(path.read_text("utf-8"))["results"]
    ]


def _listed(wh: Path, home: Path, *flags: str) -> list[dict]:
    got = clonemem(wh, home, "benchmarks", "--json", *flags)
    assert got.returncode == 0, got.stderr
    return json.loads(got.stdout)


def test_clean_run_is_quiet(clean: dict) -> None:
    assert (
        "Traceback" not in clean["stderr"]
        and "leaked" not in clean["stderr"]
        and "ERROR" not in clean["stderr"]
    )


def test_transient_errors_and_malformed_replies_leave_the_same_warehouse(
    clean: dict, tmp_path: Path
) -> None:
    cfg = tiny_config(tmp_path, transient_failure_rate=0.2, malformed_rate=0.1)
    wh, home = tmp_path / "wh.duckdb", tmp_path / "home"
    got = clonemem(wh, home, "generate", "--config", str(cfg))
    assert got.returncode == 0, got.stderr
    faulty = content(wh)
    assert faulty == clean["content"]
    from clonemem.warehouse import Warehouse

    with Warehouse.open_reader(wh) as r:
        attempts, calls = r.rows("SELECT sum(attempts), count(*) FROM llm_calls")[0]
    assert attempts > calls  # faults really happened, and were retried
    assert export(wh, home, tmp_path / "export") == clean["export"]


def test_sigkill_in_each_stage_then_resume_gives_the_same_export(
    clean: dict, tmp_path: Path
) -> None:
    cfg = tiny_config(tmp_path)
    wh, home = tmp_path / "wh.duckdb", tmp_path / "home"
    for point in ("generation.landed:1", "qa.landed:1", "gate.verdict:1"):
        got = clonemem(wh, home, "generate", "--config", str(cfg), kill_at=point)
        assert got.returncode == -signal.SIGKILL, (point, got.stderr)
        # never listed as complete while a stage is missing; --all shows it as incomplete
        assert _listed(wh, home) == []
        assert [b["status"] for b in _listed(wh, home, "--all")] == ["incomplete"]
    got = clonemem(wh, home, "generate", "--config", str(cfg))
    assert got.returncode == 0, got.stderr
    assert [b["status"] for b in _listed(wh, home)] == ["complete"]
    assert content(wh) == clean["content"]
    assert export(wh, home, tmp_path / "export") == clean["export"]

    # a re-run of the finished flow: no LLM call, the warehouse byte-for-byte unchanged
    before = wh.read_bytes()
    again = clonemem(wh, home, "generate", "--config", str(cfg))
    assert again.returncode == 0, again.stderr
    assert set(re.findall(r"(\d+) LLM calls", again.stderr)) == {"0"}, (
        again.stderr
    )  # generation and stage IV
    assert wh.read_bytes() == before, again.stderr

    # evaluation killed inside its landing transaction: nothing of it lands; the re-run lands it all
    got = clonemem(wh, home, *EVAL, kill_at="evaluation.landing:1")
    assert got.returncode == -signal.SIGKILL, got.stderr
    from clonemem.warehouse import Warehouse

    with Warehouse.open_reader(wh) as r:
        assert r.scalar("SELECT count(*) FROM eval_runs") == 0
    got = clonemem(wh, home, *EVAL, "--json", str(tmp_path / "eval.json"))
    assert got.returncode == 0, got.stderr
    assert _metrics(tmp_path / "eval.json") == clean["eval"]
    # the spend ledger: every call landed with the result it paid for, so the killed and resumed runs
    # together recorded exactly the calls of the uninterrupted one (per stage: calls and tokens)
    assert _spend(wh) == _spend(clean["wh"])


def _spend(wh: Path) -> list[tuple]:
    from clonemem.warehouse import Warehouse

    with Warehouse.open_reader(wh) as r:
        return r.rows(
            "SELECT stage, count(*), sum(input_tokens), sum(output_tokens), count(DISTINCT call_id) "
            "FROM llm_calls GROUP BY stage ORDER BY stage"
        )


def _mount_tmpfs(folder: Path, size: str) -> bool:
    folder.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True
    )
    return done.returncode == 0


def test_full_disk_gives_a_clear_error_and_corrupts_nothing(
    clean: dict, tmp_path: Path, demo_file: Path
) -> None:
    disk = tmp_path / "disk"
    if not _mount_tmpfs(disk, "64m"):
        pytest.skip("needs permission to mount a small tmpfs (root)")
    try:
        wh = disk / "wh.duckdb"
        home = (
            tmp_path / "home"
        )  # Prefect's own state is elsewhere: only the warehouse's disk is full
        got = clonemem(wh, home, "import", "release", str(demo_file), "--name", "before")
        assert got.returncode == 0, got.stderr
        before = content(wh)
        # fill the disk, leaving too little for generation to land
        free = shutil.disk_usage(disk).free
        (disk / "filler").write_bytes(b"\0" * max(0, free - 64 * 1024))
        got = clonemem(wh, home, "generate", "--config", str(tiny_config(tmp_path)))
        assert got.returncode != 0
        errors = [line for line in got.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and "space" in errors[0].lower(), got.stderr
        assert "Traceback" not in got.stderr
        (disk / "filler").unlink()
        # the warehouse still opens, the earlier benchmark is intact, the failed one is not complete
        after = content(wh)
        assert after["traces"][:1] and set(before["traces"]) <= set(after["traces"])
        listed = {b["name"]: b["status"] for b in _listed(wh, home, "--all")}
        assert listed.get("before") == "complete" and listed.get("tiny") in (None, "incomplete")
        # and once there is room again, the same command finishes the benchmark
        got = clonemem(wh, home, "generate", "--config", str(tiny_config(tmp_path)))
        assert got.returncode == 0, got.stderr
        assert {b["name"]: b["status"] for b in _listed(wh, home)} == {
            "before": "complete",
            "tiny": "complete",
        }
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)
