"""The read-only run-quality dashboard (`clonemem dashboard`): a Streamlit app over the warehouse.

``app.py`` is the entry script (sidebar, benchmark picker, navigation); ``views/`` holds one module per
page, each a script Streamlit runs and an importable module; ``queries.py`` holds every SQL read (named
functions returning polars frames), ``analysis.py`` the pure computations, ``charts.py`` the Altair
charts, ``exchanges.py`` how a stored LLM exchange is shown, and ``context.py`` the per-render warehouse
connection through the guarded read-only path.
"""

from pathlib import Path

# the page table lives in core (run artifacts link to the pages too); the app navigates it from here
from clonemem.pages import PAGES

__all__ = ["APP", "PAGES", "command"]

APP = Path(__file__).with_name("app.py")


def command(warehouse: Path, port: int, python: str) -> list[str]:
    """The command line of ``clonemem dashboard``: Streamlit's ``run`` through ``clonemem.dashboard.serve``
    (which refuses any request not addressed to 127.0.0.1:PORT or localhost:PORT, and stops Streamlit's
    address lookups), bound to 127.0.0.1, headless (no browser opened), XSRF and CORS protection on, no
    usage statistics, no file watching or rerun on save; the warehouse passed to the app."""
    return [
        python,
        "-m",
        "clonemem.dashboard.serve",
        "run",
        str(APP),
        "--server.address",
        "127.0.0.1",
        "--server.port",
        str(port),
        "--server.headless",
        "true",
        "--server.enableXsrfProtection",
        "true",
        "--server.enableCORS",
        "true",
        "--browser.gatherUsageStats",
        "false",
        "--server.fileWatcherType",
        "none",
        "--server.runOnSave",
        "false",
        "--server.allowRunOnSave",
        "false",
        "--global.developmentMode",
        "false",
        "--client.toolbarMode",
        "viewer",
        "--",
        "--warehouse",
        str(warehouse),
    ]
