"""Every environment variable the product reads, in one place.

Each variable is declared once here (name, default, what it does); code asks :func:`current` for a typed
value instead of reading ``os.environ``. Values are read on each call, not cached at import, so a test's
``monkeypatch.setenv`` and a CLI option exported for a child process both take effect. Variables of
other tools (Prefect's ``PREFECT_*``, a provider's key variable named in the run config) are theirs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

# name -> what it does (the README's "Environment" table lists the same)
WAREHOUSE = "CLONEMEM_WAREHOUSE"
LOCK_WAIT = "CLONEMEM_LOCK_WAIT"
SQL_MEMORY_LIMIT = "CLONEMEM_SQL_MEMORY_LIMIT"
SQL_TEMP_LIMIT = "CLONEMEM_SQL_TEMP_LIMIT"
EMBED_CACHE = "CLONEMEM_EMBED_CACHE"
DASHBOARD_URL = "CLONEMEM_DASHBOARD_URL"
DISABLE_LIVE_LLM = "CLONEMEM_DISABLE_LIVE_LLM"
FAULT_KILL_AT = "CLONEMEM_FAULT_KILL_AT"
HEARTBEAT = "CLONEMEM_HEARTBEAT_SECONDS"

VARIABLES: dict[str, str] = {
    WAREHOUSE: "the warehouse file when --warehouse is not given (default ./clonemem.duckdb)",
    LOCK_WAIT: "seconds a writer waits for another process's writer lock (default 600; --wait)",
    SQL_MEMORY_LIMIT: "memory one guarded query (sql, dashboard) may use (default 1GB; --memory-limit)",
    SQL_TEMP_LIMIT: "disk one guarded query may spill to (default 1GB; --temp-limit)",
    EMBED_CACHE: "the embedding cache's SQLite file, or `off` (default $XDG_CACHE_HOME/clonemem/embeddings.sqlite3)",
    DASHBOARD_URL: "where artifacts link the dashboard (default http://127.0.0.1:8501)",
    DISABLE_LIVE_LLM: "any value but empty/0/false/no: live providers refuse non-loopback base URLs (tests, CI)",
    HEARTBEAT: "seconds between evaluation's progress lines in the flow log while it works (default 30)",
    FAULT_KILL_AT: "fault injection for tests: NAME:N[,...] SIGKILLs the process at the N-th pass of a landing point",
}

DEFAULT_WAREHOUSE = "clonemem.duckdb"
DEFAULT_LOCK_WAIT_S = 600.0
DEFAULT_DASHBOARD_URL = "http://127.0.0.1:8501"
DEFAULT_HEARTBEAT_S = 30.0


@dataclass(frozen=True)
class Settings:
    warehouse: Path | None
    lock_wait_s: float
    sql_memory_limit: str | None
    sql_temp_limit: str | None
    embed_cache: Path | None  # None: the cache is off
    dashboard_url: str
    live_llm_disabled: bool
    fault_kill_at: str | None  # None: fault injection is off
    heartbeat_s: float = DEFAULT_HEARTBEAT_S


def _text(name: str) -> str | None:
    value = os.environ.get(name)
    return value if value and value.strip() else None


def _wait() -> float:
    try:
        return max(0.0, float(os.environ.get(LOCK_WAIT, DEFAULT_LOCK_WAIT_S)))
    except ValueError:
        return DEFAULT_LOCK_WAIT_S


def _heartbeat() -> float:
    try:
        value = float(os.environ.get(HEARTBEAT, DEFAULT_HEARTBEAT_S))
    except ValueError:
        return DEFAULT_HEARTBEAT_S
    return value if value > 0 else DEFAULT_HEARTBEAT_S


def _embed_cache() -> Path | None:
    setting = os.environ.get(EMBED_CACHE)
    if setting is not None:
        return None if setting.strip().lower() in ("", "off", "0", "none") else Path(setting)
    return (
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        / "clonemem"
        / "embeddings.sqlite3"
    )


def current() -> Settings:
    """The settings of this moment's environment."""
    warehouse = _text(WAREHOUSE)
    return Settings(
        warehouse=Path(warehouse).expanduser() if warehouse else None,
        lock_wait_s=_wait(),
        sql_memory_limit=_text(SQL_MEMORY_LIMIT),
        sql_temp_limit=_text(SQL_TEMP_LIMIT),
        embed_cache=_embed_cache(),
        dashboard_url=(_text(DASHBOARD_URL) or DEFAULT_DASHBOARD_URL).rstrip("/"),
        live_llm_disabled=os.environ.get(DISABLE_LIVE_LLM, "").strip().lower()
        not in ("", "0", "false", "no"),
        fault_kill_at=os.environ.get(FAULT_KILL_AT),
        heartbeat_s=_heartbeat(),
    )


def warehouse(flag: str | Path | None = None, config: str | Path | None = None) -> Path:
    """The warehouse a command uses, by the one rule: the ``--warehouse`` flag, else
    ``$CLONEMEM_WAREHOUSE``, else the run config's ``warehouse`` (commands that read one), else
    ``./clonemem.duckdb``."""
    chosen = flag or current().warehouse or config or DEFAULT_WAREHOUSE
    return Path(chosen).expanduser()
