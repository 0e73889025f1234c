"""Small things a user meets at the command line: a config path that is not a small regular file, who
holds the writer lock, and what a refused SQL statement is called."""

from __future__ import annotations

from pathlib import Path

import pytest

from clonemem.schemas.config import ConfigError, load_config
from clonemem.warehouse.guard import SqlRefused, check_statements
from clonemem.warehouse.lock import read_holder
from tests.pipeline_kit import clonemem, tiny_config


def test_config_from_dev_zero_is_refused_at_once(tmp_path: Path) -> None:
    got = clonemem(
        tmp_path / "wh.duckdb", tmp_path / "home", "generate", "--config", "/dev/zero", timeout=60
    )
    assert got.returncode == 1
    assert got.stderr.strip() == (
        "error: /dev/zero: not a regular file (a device, pipe or socket); pass a .toml file"
    )
    assert not (tmp_path / "wh.duckdb").exists()


def test_an_oversized_or_special_config_is_one_line_naming_it(tmp_path: Path) -> None:
    big = tmp_path / "big.toml"
    big.write_text("# padding\n" * 120_000)
    with pytest.raises(
        ConfigError, match=rf"^{big}: 1,200,000 bytes, over the 1,000,000-byte limit"
    ):
        load_config(big)
    fifo = tmp_path / "pipe.toml"
    import os

    os.mkfifo(fifo)  # opening it would block until a writer came
    with pytest.raises(ConfigError, match=rf"^{fifo}: not a regular file"):
        load_config(fifo)


@pytest.mark.slow
def test_the_lock_file_names_the_subcommand(tmp_path: Path) -> None:
    """A writer killed while holding the lock leaves the file naming it: the command, not its global options."""
    wh = tmp_path / "wh.duckdb"
    got = clonemem(
        wh,
        tmp_path / "home",
        "--wait",
        "0",
        "generate",
        "--config",
        str(tiny_config(tmp_path)),
        kill_at="generation.landed:1",
    )
    assert got.returncode == -9, got.stderr
    assert (
        read_holder(wh).command == "clonemem generate"
    )  # not `clonemem --warehouse …` or `clonemem --wait 0`


@pytest.mark.parametrize(
    ("sql", "named"),
    [
        ("INSTALL httpfs", "INSTALL"),
        ("FORCE INSTALL httpfs", "FORCE INSTALL"),
        ("LOAD httpfs", "LOAD"),
        ("CHECKPOINT", "CHECKPOINT"),
        ("CALL pragma_version()", "CALL"),
        ("PRAGMA version", "PRAGMA"),
        ("ANALYZE", "ANALYZE"),
        ("USE memory", "USE"),
        ("RESET threads", "RESET"),
        ("SET threads = 1", "SET"),
        ("-- why\n/* not */ DETACH x", "DETACH"),
        ("WITH a AS (SELECT 1) INSERT INTO t SELECT * FROM a", "INSERT"),
        ("UPDATE EXTENSIONS", "UPDATE EXTENSIONS"),
    ],
)
def test_a_refusal_names_the_statement(sql: str, named: str) -> None:
    with pytest.raises(SqlRefused, match=rf"^read-only SQL: {named} statements are refused;"):
        check_statements(sql)


def test_the_cli_refuses_install_by_its_name(tmp_path: Path) -> None:
    got = clonemem(tmp_path / "wh.duckdb", tmp_path / "home", "sql", "INSTALL httpfs", timeout=60)
    assert got.returncode == 1 and got.stderr.startswith(
        "error: read-only SQL: INSTALL statements are refused;"
    )
