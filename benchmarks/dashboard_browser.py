"""Dashboard page load times in a real browser on a large warehouse (target: every page under 2.5 s).

Builds (or reuses, ``--folder``) the warehouse of ``benchmarks/dashboard_pages.py`` (11k traces, 2.5k
questions, three evaluations), starts `clonemem dashboard` on a free loopback port, and loads every
page for each benchmark in headless Chromium (Playwright driving Debian's ``/usr/bin/chromium``:
``apt-get install -y chromium``; never ``playwright install``). A load is timed from navigation until
the page is drawn: its title shown, Streamlit's running indicator gone, no skeleton left, every chart
drawn (a canvas or SVG in each Vega-Lite element) and every table shown in the window drawn (its
data grid's canvas; the grid draws one below the fold or in a closed expander once it is shown).

Two kinds of load per page, one warm-up each, then ``--repeat`` timed ones:
- fresh (the target): a new browser context each time: no HTTP cache, a new Streamlit session; a
  first visit, which fetches and compiles all of Streamlit's frontend (about 5 MB of JavaScript);
- warm: a new page (a new Streamlit session, the script run afresh) in a context that has loaded the
  page before: a visit from a browser that has the frontend in its cache, as every visit after the
  first is (Streamlit serves its bundles as immutable). Switching pages in the sidebar reloads nothing.

With every load its phases: the document loaded (Streamlit's main bundle run), the WebSocket opened,
the title shown (the page's script running on the server). The floor is Streamlit's own cost: a
two-line app (a title, a two-row table and a two-bar chart) served by the same Streamlit, loaded the
same way. The machine's load average (1 min) is recorded around every page; the benchmark's own
browser and server raise it by about 1-2 on a quiet 2-core machine. Prints JSON.

    python benchmarks/dashboard_browser.py [--folder DIR] [--repeat 3] [--benchmark NAME ...]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dashboard_pages import warehouse_in

CHROMIUM = Path("/usr/bin/chromium")
TARGET_S = 2.5
DRAWN = """() => {
  if (document.querySelector('[data-testid="stStatusWidget"]')) return false;
  if (!document.querySelector('h1')) return false;
  if (document.querySelector('[data-testid="stSkeleton"]')) return false;
  const charts = [...document.querySelectorAll('[data-testid="stVegaLiteChart"]')];
  const tables = [...document.querySelectorAll('[data-testid="stDataFrame"]')]
    // shown and in the window: the grid draws a table below the fold, or in a closed expander, once it is shown
    .filter(t => t.checkVisibility() && t.getBoundingClientRect().top < window.innerHeight);
  return charts.every(c => c.querySelector('canvas, svg')) && tables.every(t => t.querySelector('canvas'));
}"""
FLOOR_APP = """import altair as alt
import pandas as pd
import streamlit as st

st.set_page_config(page_title="floor", layout="wide")
st.title("Floor")
frame = pd.DataFrame({"x": ["a", "b"], "y": [1, 2]})
st.dataframe(frame, hide_index=True)
st.altair_chart(alt.Chart(frame).mark_bar().encode(x="x", y="y"))
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_dashboard(warehouse: Path, port: int) -> subprocess.Popen:
    exe = str(Path(sys.executable).with_name("clonemem"))
    return _healthy([exe, "dashboard", "--warehouse", str(warehouse), "--port", str(port)], port)


def start_floor(folder: Path, port: int) -> subprocess.Popen:
    """Streamlit serving :data:`FLOOR_APP` with the dashboard's server options."""
    from clonemem.dashboard import APP, command

    app = folder / "floor_app.py"
    app.write_text(FLOOR_APP, "utf-8")
    args = command(folder / "unused.duckdb", port, sys.executable)
    args[args.index(str(APP))] = str(app)
    return _healthy(args, port)


def _healthy(args: list[str], port: int) -> subprocess.Popen:
    server = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"the dashboard exited with {server.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return server
        except OSError:
            time.sleep(0.3)
    server.terminate()
    raise SystemExit("the dashboard did not become healthy in 60 s")


def load_once(context, url: str, title: str) -> dict[str, float]:
    """Seconds from navigation to the page drawn, in a new page of ``context`` (a new Streamlit session),
    with its phases: the document loaded (Streamlit's main bundle run), the WebSocket opened, the title
    shown (the page's script is running on the server); and how many charts and tables the page has."""
    page = context.new_page()
    try:
        opened: list[float] = []
        page.on("websocket", lambda _ws: opened.append(time.perf_counter()))
        t0 = time.perf_counter()
        page.goto(url)
        loaded = time.perf_counter() - t0
        page.get_by_role("heading", name=title, exact=True).first.wait_for(timeout=120_000)
        titled = time.perf_counter() - t0
        page.wait_for_function(DRAWN, timeout=120_000, polling=50)
        seconds = time.perf_counter() - t0
        if page.locator('[data-testid="stException"]').count():
            raise SystemExit(f"{url}: the page raised an exception")
        return {
            "s": seconds,
            "document_s": loaded,
            "websocket_s": (opened[0] - t0) if opened else float("nan"),
            "title_s": titled,
            "charts": page.locator('[data-testid="stVegaLiteChart"]').count(),
            "tables": page.locator('[data-testid="stDataFrame"]').count(),
        }
    finally:
        page.close()


def fresh_load(browser, url: str, title: str) -> dict[str, float]:
    """A first visit: a new browser context (no HTTP cache)."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        return load_once(context, url, title)
    finally:
        context.close()


def time_page(browser, url: str, title: str, repeat: int) -> dict[str, float]:
    """``repeat`` fresh and ``repeat`` warm loads of one page (one warm-up each), with the load average."""
    load_before = os.getloadavg()[0]
    fresh = [fresh_load(browser, url, title) for _ in range(repeat + 1)][1:]
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        warm = [load_once(context, url, title) for _ in range(repeat + 1)][1:]
    finally:
        context.close()

    def median(loads: list[dict[str, float]], key: str) -> float:
        return round(statistics.median(t[key] for t in loads), 3)

    return {
        "median_s": median(fresh, "s"),
        "max_s": round(max(t["s"] for t in fresh), 3),
        "median_document_s": median(fresh, "document_s"),
        "median_websocket_s": median(fresh, "websocket_s"),
        "median_title_s": median(fresh, "title_s"),
        "warm_median_s": median(warm, "s"),
        "warm_max_s": round(max(t["s"] for t in warm), 3),
        "charts": fresh[-1]["charts"],
        "tables": fresh[-1]["tables"],
        "load_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)],
    }


def launch(pw):
    return pw.chromium.launch(
        executable_path=str(CHROMIUM),
        args=[
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
        ],
    )


def time_floor(folder: Path, repeat: int) -> dict[str, float]:
    from playwright.sync_api import sync_playwright

    port = free_port()
    server = start_floor(folder, port)
    try:
        with sync_playwright() as pw:
            browser = launch(pw)
            try:
                out = time_page(browser, f"http://127.0.0.1:{port}/", "Floor", repeat)
            finally:
                browser.close()
    finally:
        server.terminate()
        server.wait(20)
    print(f"{'floor':>12} {'(Streamlit alone)':<20} {out}", file=sys.stderr, flush=True)
    return out


def time_pages(
    warehouse: Path, benchmarks: list[str], repeat: int
) -> dict[str, dict[str, dict[str, float]]]:
    from playwright.sync_api import sync_playwright

    from clonemem.dashboard import PAGES

    if not CHROMIUM.exists():
        raise SystemExit("Debian's chromium is not installed: apt-get install -y chromium")
    port = free_port()
    server = start_dashboard(warehouse, port)
    out: dict[str, dict[str, dict[str, float]]] = {}
    try:
        with sync_playwright() as pw:
            browser = launch(pw)
            try:
                for name in benchmarks:
                    out[name] = {}
                    for title, _script, path in PAGES:
                        url = f"http://127.0.0.1:{port}/{path}?benchmark={name}"
                        out[name][title] = time_page(browser, url, title, repeat)
                        print(
                            f"{name:>12} {title:<20} {out[name][title]}",
                            file=sys.stderr,
                            flush=True,
                        )
            finally:
                browser.close()
    finally:
        server.terminate()
        server.wait(20)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--folder",
        type=Path,
        help="build the warehouse here and keep it; one already there is reused",
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--benchmark", action="append", help="only these benchmarks (default: all)")
    parser.add_argument("--personas", type=int, default=4)
    parser.add_argument("--traces", type=int, default=2600, help="traces per persona")
    parser.add_argument("--questions", type=int, default=550, help="questions per persona")
    args = parser.parse_args()
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    with tempfile.TemporaryDirectory(prefix="clonemem-dash-browser-") as tmp:
        folder = args.folder or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        path, build_times = warehouse_in(folder, args.personas, args.traces, args.questions)
        import duckdb

        con = duckdb.connect(str(path), read_only=True)
        try:
            counts = dict(
                zip(
                    ("benchmarks", "traces", "questions", "eval_runs", "llm_calls"),
                    con.execute(
                        "SELECT (SELECT count(*) FROM benchmarks), (SELECT count(*) FROM traces), "
                        "(SELECT count(*) FROM questions), (SELECT count(*) FROM eval_runs), "
                        "(SELECT count(*) FROM llm_calls)"
                    ).fetchone(),
                )
            )
            names = args.benchmark or [
                r[0] for r in con.execute("SELECT name FROM benchmarks ORDER BY name").fetchall()
            ]
        finally:
            con.close()
        floor = time_floor(folder, args.repeat)
        pages = time_pages(path, names, args.repeat)
    medians = [p["median_s"] for per in pages.values() for p in per.values()]
    worst = max(p["max_s"] for per in pages.values() for p in per.values())
    loads = [x for per in pages.values() for p in per.values() for x in p["load_1min"]]
    print(
        json.dumps(
            {
                "benchmark": "dashboard_browser",
                "warehouse": counts,
                "build": build_times,
                "target_s": TARGET_S,
                "timing": "headless Chromium, navigation until title shown, script "
                "finished, every chart and table drawn; fresh: a new browser context per load (no cache); "
                f"warm: a new session in a browser that has the frontend cached; median and max of "
                f"{args.repeat} loads after one warm-up",
                "load_1min": [min(loads), max(loads)],
                "floor": floor,
                "pages": pages,
                "worst_median_s": max(medians),
                "worst_s": worst,
                "all_medians_under_target": max(medians) < TARGET_S,
                "all_under_target": worst < TARGET_S,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
