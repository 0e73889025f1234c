"""Dashboard page load times in a real browser on a large warehouse (target: every page under 2.5 s).

Builds (or reuses, ``--folder``) the warehouse of ``benchmarks/dashboard_pages.py`` (11k traces, 2.5k
questions, three evaluations), starts `clonemem dashboard` on a free loopback port, and loads every
page for each benchmark in headless Chromium (Playwright driving Debian's ``/usr/bin/chromium``:
``apt-get install -y chromium``; never ``playwright install``). Each load is a fresh browser context
(no cache, a new Streamlit session) and is timed from navigation until the page is drawn: its title
shown, Streamlit's running indicator gone, and every chart drawn (a canvas or SVG in each Vega-Lite
element). One warm-up load per page, then ``--repeat`` timed loads. Prints JSON.

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
  return charts.every(c => c.querySelector('canvas, svg'));
}"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_dashboard(warehouse: Path, port: int) -> subprocess.Popen:
    exe = str(Path(sys.executable).with_name("clonemem"))
    server = subprocess.Popen([exe, "dashboard", "--warehouse", str(warehouse), "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
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


def load_once(browser, url: str, title: str) -> dict[str, float]:
    """Seconds from navigation to the page drawn, in a fresh context (no cache, a new session), with
    its phases: the document loaded (Streamlit's scripts fetched), the title shown (the page's script
    is running on the server), every chart drawn; and how many charts and tables the page has."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        page = context.new_page()
        t0 = time.perf_counter()
        page.goto(url)
        loaded = time.perf_counter() - t0
        page.get_by_role("heading", name=title, exact=True).first.wait_for(timeout=120_000)
        titled = time.perf_counter() - t0
        page.wait_for_function(DRAWN, timeout=120_000, polling=50)
        seconds = time.perf_counter() - t0
        if page.locator('[data-testid="stException"]').count():
            raise SystemExit(f"{url}: the page raised an exception")
        return {"s": seconds, "document_s": loaded, "title_s": titled,
                "charts": page.locator('[data-testid="stVegaLiteChart"]').count(),
                "tables": page.locator('[data-testid="stDataFrame"]').count()}
    finally:
        context.close()


def time_pages(warehouse: Path, benchmarks: list[str], repeat: int) -> dict[str, dict[str, dict[str, float]]]:
    from playwright.sync_api import sync_playwright

    from clonemem.dashboard import PAGES

    if not CHROMIUM.exists():
        raise SystemExit("Debian's chromium is not installed: apt-get install -y chromium")
    port = free_port()
    server = start_dashboard(warehouse, port)
    out: dict[str, dict[str, dict[str, float]]] = {}
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=[
                "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run"])
            try:
                for name in benchmarks:
                    out[name] = {}
                    for title, _script, path in PAGES:
                        url = f"http://127.0.0.1:{port}/{path}?benchmark={name}"
                        loads = [load_once(browser, url, title) for _ in range(repeat + 1)]
                        timed = loads[1:]
                        out[name][title] = {
                            "median_s": round(statistics.median(t["s"] for t in timed), 3),
                            "max_s": round(max(t["s"] for t in timed), 3), "first_s": round(loads[0]["s"], 3),
                            "median_document_s": round(statistics.median(t["document_s"] for t in timed), 3),
                            "median_title_s": round(statistics.median(t["title_s"] for t in timed), 3),
                            "charts": timed[-1]["charts"], "tables": timed[-1]["tables"]}
                        print(f"{name:>12} {title:<20} {out[name][title]}", file=sys.stderr, flush=True)
            finally:
                browser.close()
    finally:
        server.terminate()
        server.wait(20)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=Path, help="build the warehouse here and keep it; one already there is reused")
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
            counts = dict(zip(("benchmarks", "traces", "questions", "eval_runs", "llm_calls"), con.execute(
                "SELECT (SELECT count(*) FROM benchmarks), (SELECT count(*) FROM traces), "
                "(SELECT count(*) FROM questions), (SELECT count(*) FROM eval_runs), "
                "(SELECT count(*) FROM llm_calls)").fetchone()))
            names = args.benchmark or [r[0] for r in con.execute("SELECT name FROM benchmarks ORDER BY name").fetchall()]
        finally:
            con.close()
        pages = time_pages(path, names, args.repeat)
    worst = max(p["max_s"] for per in pages.values() for p in per.values())
    print(json.dumps({"benchmark": "dashboard_browser", "warehouse": counts, "build": build_times,
                      "target_s": TARGET_S, "timing": "headless Chromium, fresh context per load, navigation until "
                      f"title shown, script finished and every chart drawn; median and max of {args.repeat} loads "
                      "after one warm-up", "pages": pages, "worst_s": worst, "all_under_target": worst < TARGET_S},
                     indent=2))


if __name__ == "__main__":
    main()
