"""Prefect settings for local runs on a small machine with no network.

Must run before ``import prefect``: Prefect reads its settings at import time. Every value is a
default, so anything the user exports wins.
"""

from __future__ import annotations

import os

DEFAULTS = {
    # The ephemeral server takes 10-20 s to start on 2 cores; the default timeout (20 s) is too tight.
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "DO_NOT_TRACK": "1",
    "PREFECT_CLOUD_ENABLE_ORCHESTRATION_TELEMETRY": "false",
    # The CLI prints its own summaries; Prefect's INFO lines would bury them.
    "PREFECT_LOGGING_LEVEL": "WARNING",
    # The ephemeral server logs tracebacks when it is stopped with events still queued (at exit).
    "PREFECT_LOGGING_SERVER_LEVEL": "CRITICAL",
}


def configure() -> None:
    for key, value in DEFAULTS.items():
        os.environ.setdefault(key, value)
