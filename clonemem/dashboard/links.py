"""Links from the dashboard's ids to the Prefect UI, and how counts are written.

A flow-run id links to ``{UI}/runs/flow-run/<id>``. ``UI`` is ``$PREFECT_UI_URL`` when set, else
derived from ``$PREFECT_API_URL`` (a server's API is served under ``/api`` of its UI: the suffix is
dropped); with neither, ids stay plain text (an ephemeral Prefect run has no UI to link to)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from decimal import Decimal

import polars as pl
import streamlit as st

UI_ENV = "PREFECT_UI_URL"
API_ENV = "PREFECT_API_URL"
FLOW_RUN_PATH = "/runs/flow-run/"


def prefect_ui(environ: Mapping[str, str] | None = None) -> str | None:
    """The Prefect UI's base URL (no trailing slash), or None when neither variable says where it is."""
    env = os.environ if environ is None else environ
    ui = (env.get(UI_ENV) or "").strip().rstrip("/")
    if ui:
        return ui
    api = (env.get(API_ENV) or "").strip().rstrip("/")
    if not api:
        return None
    return api[: -len("/api")] if api.endswith("/api") else api


def flow_run_url(flow_run_id: str | None, ui: str | None) -> str | None:
    if not flow_run_id or not ui:
        return None
    return f"{ui}{FLOW_RUN_PATH}{flow_run_id}"


def link_flow_runs(
    frame: pl.DataFrame, columns: list[str], ui: str | None
) -> tuple[pl.DataFrame, dict]:
    """``frame`` with each of ``columns`` (flow-run ids) turned into its Prefect UI URL, and the column
    configuration that shows those URLs as links labelled with the id; unchanged without a UI."""
    present = [c for c in columns if c in frame.columns]
    if ui is None or not present:
        return frame, {}
    linked = frame.with_columns(
        [
            pl.when(pl.col(c).is_not_null()).then(pl.lit(ui + FLOW_RUN_PATH) + pl.col(c)).alias(c)
            for c in present
        ]
    )
    config = {
        c: st.column_config.LinkColumn(c, display_text=FLOW_RUN_PATH + "(.*)$") for c in present
    }
    return linked, config


def count(n: int | float | Decimal | None) -> str:
    """A count with thousands separators (``12,345``); ``-`` for none."""
    return "-" if n is None else f"{int(n):,}"


COUNT_FORMAT = "localized"  # Streamlit's number format with the reader's thousands separators


def count_columns(frame: pl.DataFrame, columns: tuple[str, ...]) -> dict:
    """Column configuration writing the integer columns of ``frame`` among ``columns`` with separators."""
    return {
        c: st.column_config.NumberColumn(c, format=COUNT_FORMAT)
        for c in columns
        if c in frame.columns and frame[c].dtype.is_integer()
    }
