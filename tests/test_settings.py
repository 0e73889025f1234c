"""One place per knob: every CLONEMEM_* environment variable is declared in clonemem/settings.py, read
through it, and listed in the README."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from clonemem import layout, settings

ROOT = Path(__file__).parent.parent
NAME = re.compile(r"CLONEMEM_[A-Z_]+")
SOURCES = [
    p
    for d in layout.SOURCES
    for p in sorted((ROOT / d).rglob("*.py"))
    if p != ROOT / "clonemem" / "settings.py"
]


def named_variables(source: str) -> list[str]:
    return [
        n.value
        for n in ast.walk(ast.parse(source))
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and NAME.fullmatch(n.value)
    ]


def test_no_module_but_settings_names_a_variable() -> None:
    wrong = {
        str(p.relative_to(ROOT)): names
        for p in SOURCES
        if (names := named_variables(p.read_text("utf-8")))
    }
    assert not wrong, (
        f"environment variables named outside clonemem/settings.py (declare and read them there): {wrong}"
    )


def test_the_check_sees_a_variable_named_elsewhere() -> None:
    assert named_variables('import os\nos.environ.get("CLONEMEM_NEW_KNOB")\n') == [
        "CLONEMEM_NEW_KNOB"
    ]


def test_every_variable_is_declared_and_documented() -> None:
    readme = (ROOT / "README.md").read_text("utf-8")
    assert set(settings.VARIABLES) == {
        v
        for k, v in vars(settings).items()
        if k.isupper() and isinstance(v, str) and NAME.fullmatch(v)
    }
    assert [v for v in settings.VARIABLES if f"`{v}`" not in readme] == []


def test_values_follow_the_environment_of_the_moment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(settings.LOCK_WAIT, "12")
    monkeypatch.setenv(settings.EMBED_CACHE, "off")
    monkeypatch.setenv(settings.WAREHOUSE, str(tmp_path / "w.duckdb"))
    now = settings.current()
    assert (now.lock_wait_s, now.embed_cache, now.warehouse) == (12.0, None, tmp_path / "w.duckdb")
    monkeypatch.setenv(settings.LOCK_WAIT, "soon")  # unreadable: the default, not a crash
    monkeypatch.delenv(settings.EMBED_CACHE)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    now = settings.current()
    assert now.lock_wait_s == settings.DEFAULT_LOCK_WAIT_S
    assert now.embed_cache == tmp_path / "clonemem" / "embeddings.sqlite3"


def test_the_warehouse_is_the_flag_then_the_environment_then_the_config_then_the_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from clonemem.dashboard.context import warehouse_path

    monkeypatch.delenv(settings.WAREHOUSE, raising=False)
    assert settings.warehouse() == Path("clonemem.duckdb") == warehouse_path([])
    assert settings.warehouse(config="run.duckdb") == Path("run.duckdb")
    monkeypatch.setenv(settings.WAREHOUSE, "~/env.duckdb")
    assert (
        settings.warehouse(config="run.duckdb")
        == Path("~/env.duckdb").expanduser()
        == warehouse_path([])
    )
    assert settings.warehouse("flag.duckdb", "run.duckdb") == Path("flag.duckdb")
    assert warehouse_path(["--warehouse", "flag.duckdb"]) == warehouse_path(
        ["--warehouse=flag.duckdb"]
    )
    assert warehouse_path(["--warehouse=flag.duckdb"]) == Path("flag.duckdb")


# values the code shares, each written in exactly one module (the others import its name)
WRITTEN_ONCE = {"clonemem.duckdb": "clonemem/settings.py", "conversation_turn": "schemas/config.py"}


def test_shared_values_are_written_in_one_module() -> None:
    where: dict[str, list[str]] = {value: [] for value in WRITTEN_ONCE}
    for path in [*SOURCES, ROOT / "clonemem" / "settings.py"]:
        constants = {
            n.value
            for n in ast.walk(ast.parse(path.read_text("utf-8")))
            if isinstance(n, ast.Constant) and isinstance(n.value, str)
        }
        for value in constants & set(WRITTEN_ONCE):
            where[value].append(str(path.relative_to(ROOT)))
    assert where == {value: [home] for value, home in WRITTEN_ONCE.items()}
