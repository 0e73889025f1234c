"""Entry script of the dashboard: ``streamlit run app.py -- --warehouse PATH`` (what `clonemem dashboard`
runs). Opens the warehouse read-only once per render, shows the benchmark picker and runs the page."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from clonemem.dashboard import PAGES, context

HERE = Path(__file__).parent

st.set_page_config(page_title="CloneMem dashboard", layout="wide")
navigation = st.navigation(
    [
        st.Page(HERE / script, title=title, url_path=url or None, default=i == 0)
        for i, (title, script, url) in enumerate(PAGES)
    ]
)

with context.open_session(context.warehouse_path()) as session:
    st.sidebar.caption(
        f"Warehouse: `{session.path}` (read-only"
        f"{'; a snapshot: another process is writing it' if session.snapshot else ''})"
    )
    context.choose_benchmark(session)
    st.sidebar.button(
        "Re-read the warehouse",
        help="pages read the warehouse afresh on every interaction; "
        "this reads it again now (e.g. while a run is writing it)",
    )
    navigation.run()
