"""Warehouses that several test files start from, built once per test process and copied to each user
(a DuckDB file copies in milliseconds; building one runs the real flows for tens of seconds).

Built in the test process itself, so the Prefect home of that process holds the steps' cache: a test that
runs a flow again on its copy is served from it, as a second run of a user's would be."""

from __future__ import annotations

import shutil
from pathlib import Path

from typer.testing import CliRunner, Result

from tests.pipeline_kit import tiny_config


def copy_warehouse(src: Path, dest: Path) -> Path:
    """``src`` (and its WAL, if any) copied to ``dest``; returns ``dest``."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dest)
    wal = src.with_name(src.name + ".wal")
    if wal.exists():
        shutil.copyfile(wal, dest.with_name(dest.name + ".wal"))
    return dest


def build_tiny_gated(folder: Path, language: str = "en") -> Path:
    """`configs/tiny.toml` generated offline (stages I–IV) and passed by the gate, as `clonemem generate`
    does; in ``zh`` with no per-type minimum (one tiny zh persona has no counterfactual item)."""
    from clonemem.flows.pipeline import pipeline_flow

    config = tiny_config(folder, name=f"tiny-{language}")
    if language != "en":
        config.write_text(
            config.read_text("utf-8")
            .replace("[generation]\n", f'[generation]\nlanguage = "{language}"\n', 1)
            .replace("[gate]\n", "[gate]\nmin_questions_per_type = 0\n", 1),
            "utf-8",
        )
    path = folder / "wh.duckdb"
    assert pipeline_flow(str(path), str(config), evaluate=False).gate_status == "passed"
    return path


def cli(wh: Path, *args: object) -> Result:
    """`clonemem --warehouse WH ARGS...` in this process (its exit code, stdout and stderr), for tests of
    what a command does rather than of the process it runs in."""
    from clonemem.cli import app

    return CliRunner().invoke(app, ["--warehouse", str(wh), *map(str, args)])
