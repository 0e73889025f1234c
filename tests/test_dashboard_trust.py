"""The dashboard trusts no one: only requests addressed to the address it is bound to are served (a forged
``Host``, as in DNS rebinding, and a foreign ``Origin``, as from a page on another localhost port, are
refused, over HTTP and WebSocket alike), and it makes no outbound connection of any kind, which a
socket audit hook in the server process and the browser's own request log both watch."""

from __future__ import annotations

import base64
import http.server
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from clonemem.dashboard import PAGES
from clonemem.dashboard.serve import refusal
from tests.dashboard_kit import (
    descendants,
    free_port,
    full_warehouse,
    imported_warehouse,
    stop,
    wait_healthy,
)

CHROMIUM = Path("/usr/bin/chromium")
EXE = str(Path(sys.executable).with_name("clonemem"))

# Loaded into the dashboard's Python (PYTHONPATH): records every attempt to reach a non-loopback address
# or to resolve a name that is not loopback's, as one JSON line in $OUTBOUND_LOG.
SITECUSTOMIZE = """
import ipaddress, json, os, sys

_LOG = os.environ["OUTBOUND_LOG"]
_LOCAL_NAMES = {"localhost", "127.0.0.1", "::1", ""}


def _local(host):
    if not isinstance(host, str):
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return host.lower() in _LOCAL_NAMES


def _record(event, target):
    with open(_LOG, "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"event": event, "target": repr(target)}) + "\\n")


def _hook(event, args):
    if event in ("socket.connect", "socket.sendto", "socket.sendmsg"):
        address = args[-1]
        if isinstance(address, tuple) and address and not _local(address[0]):
            _record(event, address)
    elif event in ("socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyname_ex"):
        if args and isinstance(args[0], (str, bytes)):
            name = args[0].decode() if isinstance(args[0], bytes) else args[0]
            if not _local(name):
                _record(event, name)


sys.addaudithook(_hook)
"""


class Dashboard:
    """``clonemem dashboard`` as a user starts it, with the outbound audit hook in its Python."""

    def __init__(self, warehouse: Path, folder: Path) -> None:
        hook = folder / "hook"
        hook.mkdir(exist_ok=True)
        (hook / "sitecustomize.py").write_text(SITECUSTOMIZE, "utf-8")
        self.log = folder / "outbound.jsonl"
        self.port = free_port()
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(hook), os.environ.get("PYTHONPATH", "")]),
            "OUTBOUND_LOG": str(self.log),
        }
        self.proc = subprocess.Popen(
            [EXE, "dashboard", "--warehouse", str(warehouse), "--port", str(self.port)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
        )
        wait_healthy(self.port, self.proc, timeout=90.0)

    def outbound(self) -> list[dict]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text("utf-8").splitlines()]

    def close(self) -> None:
        children = descendants(self.proc.pid)
        stop(self.proc.pid)
        self.proc.wait(10)
        for pid in children:
            stop(pid, timeout=2)


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> Path:
    return imported_warehouse(tmp_path_factory.mktemp("trust-imported") / "wh.duckdb")


@pytest.fixture
def dashboard(imported: Path, tmp_path: Path) -> Iterator[Dashboard]:
    dash = Dashboard(imported, tmp_path)
    try:
        yield dash
    finally:
        dash.close()


def http_status(port: int, path: str, **headers: str) -> tuple[int, bytes]:
    """One raw HTTP/1.1 request to 127.0.0.1:PORT with exactly these headers (Host included)."""
    lines = [
        f"GET {path} HTTP/1.1",
        *(f"{k.replace('_', '-')}: {v}" for k, v in headers.items()),
        "Connection: close",
        "",
        "",
    ]
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall("\r\n".join(lines).encode("latin-1"))
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    status = int(data.split(b" ", 2)[1])
    return status, data


def websocket_status(port: int, host: str, origin: str | None) -> int:
    key = base64.b64encode(os.urandom(16)).decode()
    headers = {
        "Host": host,
        "Upgrade": "websocket",
        "Connection": "Upgrade",
        "Sec-WebSocket-Key": key,
        "Sec-WebSocket-Version": "13",
    }
    if origin is not None:
        headers["Origin"] = origin
    lines = ["GET /_stcore/stream HTTP/1.1", *(f"{k}: {v}" for k, v in headers.items()), "", ""]
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall("\r\n".join(lines).encode("latin-1"))
        data = b""
        while b"\r\n" not in data:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    return int(data.split(b" ", 2)[1])


def test_the_audit_hook_sees_an_outside_connection_attempt(tmp_path: Path) -> None:
    """The watcher of the tests below is itself watched: it records what it must."""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(SITECUSTOMIZE, "utf-8")
    log = tmp_path / "outbound.jsonl"
    code = (
        "import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\ns.connect(('192.0.2.1', 9))\n"
        "t = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\nt.connect(('127.0.0.1', 9))\n"
    )
    subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(hook), "OUTBOUND_LOG": str(log)},
        check=True,
        timeout=30,
    )
    got = [json.loads(line) for line in log.read_text("utf-8").splitlines()]
    assert got == [{"event": "socket.connect", "target": "('192.0.2.1', 9)"}]


def test_refusal_rules() -> None:
    def scope(**headers: str) -> dict:
        return {
            "type": "http",
            "headers": [
                (k.replace("_", "-").lower().encode(), v.encode()) for k, v in headers.items()
            ],
        }

    assert refusal(scope(host="127.0.0.1:8501"), 8501) is None
    assert refusal(scope(host="localhost:8501", origin="http://localhost:8501"), 8501) is None
    assert refusal(scope(host="LOCALHOST:8501", sec_fetch_site="same-origin"), 8501) is None
    assert "Host" in refusal(scope(host="evil.example:8501"), 8501)
    assert "Host" in refusal(scope(host="127.0.0.1:8502"), 8501)
    assert "Host" in refusal(scope(), 8501)
    assert "Origin" in refusal(scope(host="127.0.0.1:8501", origin="http://localhost:3000"), 8501)
    assert "Origin" in refusal(scope(host="127.0.0.1:8501", origin="null"), 8501)
    assert "Origin" in refusal(scope(host="127.0.0.1:8501", origin="https://127.0.0.1:8501"), 8501)
    assert "another site" in refusal(scope(host="127.0.0.1:8501", sec_fetch_site="same-site"), 8501)


def test_forged_host_and_foreign_origin_are_refused_a_proper_request_is_served(
    dashboard: Dashboard,
) -> None:
    port = dashboard.port
    proper = f"127.0.0.1:{port}"
    status, head = http_status(port, "/", Host=proper)
    assert status == 200, head
    assert http_status(port, "/", Host=f"localhost:{port}")[0] == 200
    assert (
        http_status(port, "/_stcore/host-config", Host=proper, Origin=f"http://localhost:{port}")[0]
        == 200
    )
    # DNS rebinding: the browser sends the attacker's name as Host (and Origin)
    assert http_status(port, "/", Host=f"rebind.example:{port}")[0] == 403
    assert (
        http_status(
            port,
            "/_stcore/host-config",
            Host=f"rebind.example:{port}",
            Origin=f"http://rebind.example:{port}",
        )[0]
        == 403
    )
    # a page on another localhost port
    assert (
        http_status(port, "/_stcore/host-config", Host=proper, Origin="http://localhost:3000")[0]
        == 403
    )
    assert (
        http_status(
            port, "/_stcore/host-config", Host=proper, Origin=f"http://127.0.0.1:{port + 1}"
        )[0]
        == 403
    )

    # the WebSocket that carries every page's data
    assert websocket_status(port, proper, f"http://127.0.0.1:{port}") == 101
    assert (
        websocket_status(port, proper, None) == 101
    )  # a client that sends no Origin (not a browser)
    assert websocket_status(port, f"rebind.example:{port}", f"http://rebind.example:{port}") == 403
    assert websocket_status(port, proper, "http://localhost:3000") == 403
    assert websocket_status(port, proper, f"http://127.0.0.1:{port + 1}") == 403
    assert websocket_status(port, proper, "null") == 403
    # refusing them reached for no outside address (Streamlit's allowed-origins check would)
    assert dashboard.outbound() == []


# A page served from another localhost port that tries to read the dashboard: its WebSocket (page data)
# and a fetch of the host configuration.
ATTACKER = """<!doctype html><title>other</title><script>
window.outcome = new Promise((resolve) => {
  const out = {};
  const done = () => { if ("ws" in out && "fetch" in out) resolve(out); };
  fetch("http://127.0.0.1:PORT/_stcore/host-config").then((r) => r.text())
    .then((t) => { out.fetch = "read " + t.length; done(); }, () => { out.fetch = "blocked"; done(); });
  const ws = new WebSocket("ws://127.0.0.1:PORT/_stcore/stream");
  ws.onopen = () => { out.ws = "open"; ws.close(); done(); };
  ws.onerror = () => { if (!("ws" in out)) { out.ws = "refused"; done(); } };
});
</script>"""


def serve_attacker(port: int) -> tuple[http.server.ThreadingHTTPServer, int]:
    page = ATTACKER.replace("PORT", str(port)).encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.server_address[1]


@pytest.mark.slow
@pytest.mark.ci
@pytest.mark.prefect
def test_every_page_in_chromium_with_no_outbound_request_and_other_origins_refused(
    tmp_path: Path,
) -> None:
    if not CHROMIUM.exists():
        if os.environ.get("CI"):
            pytest.fail("CI must have Debian's chromium (.ci/run installs it)")
        pytest.skip("Debian's chromium is not installed (apt-get install -y chromium)")
    from playwright.sync_api import sync_playwright

    warehouse = full_warehouse(tmp_path)  # generated, gated, evaluated: every page draws its charts
    dash = Dashboard(warehouse, tmp_path)
    port = dash.port
    attacker, attacker_port = serve_attacker(port)
    local = {f"127.0.0.1:{port}", f"127.0.0.1:{attacker_port}", f"rebind.test:{port}"}
    requested: list[str] = []
    before = set(descendants(os.getpid()))
    browser_pids: list[int] = []
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=str(CHROMIUM),
                args=[
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-background-networking",
                    "--disable-component-update",
                    "--disable-sync",
                    "--no-first-run",
                    # DNS rebinding without DNS: the attacker's name resolves to loopback
                    "--host-resolver-rules=MAP rebind.test 127.0.0.1",
                ],
            )
            browser_pids = sorted(
                set(descendants(os.getpid()))
                - before
                - {dash.proc.pid}
                - set(descendants(dash.proc.pid))
            )
            try:
                page = browser.new_page()
                page.on("request", lambda r: requested.append(r.url))
                page.on("websocket", lambda ws: requested.append(ws.url))
                for title, _script, url in PAGES:
                    page.goto(f"http://127.0.0.1:{port}/{url}?benchmark=tiny")
                    page.get_by_role("heading", name=title, exact=True).first.wait_for(
                        timeout=60_000
                    )
                    # a chart (its assets are requests too), or the page's note that it has no data for one:
                    # a page over calls has none when the session's cache served this warehouse's steps
                    page.locator(
                        '[data-testid="stVegaLiteChart"], [data-testid="stAlert"], '
                        '[data-testid="stAlertContainer"]'
                    ).first.wait_for(state="attached", timeout=60_000)
                    page.wait_for_function(
                        "!document.querySelector('[data-testid=\"stStatusWidget\"]')",
                        timeout=60_000,
                    )
                    page.wait_for_timeout(1000)  # late requests (fonts, icons, chart assets)
                    assert page.locator('[data-testid="stException"]').count() == 0, title

                # a page from another localhost port gets no page data
                page.goto(f"http://127.0.0.1:{attacker_port}/")
                outcome = page.evaluate("window.outcome")
                assert outcome == {"ws": "refused", "fetch": "blocked"}, outcome

                # DNS rebinding: the dashboard's own page under the attacker's name is refused
                response = page.goto(f"http://rebind.test:{port}/?benchmark=tiny")
                assert response is not None and response.status == 403
                page.wait_for_timeout(1000)
                assert page.locator('[data-testid="stVegaLiteChart"]').count() == 0
            finally:
                browser.close()
    finally:
        attacker.shutdown()
        dash.close()
        for pid in browser_pids:
            stop(pid, timeout=2)
    outside = [u for u in requested if u.split("://", 1)[-1].split("/", 1)[0] not in local]
    assert outside == [], outside  # the browser was sent nowhere else (no fonts, CDN or telemetry)
    assert dash.outbound() == []  # nor did the server reach out
    assert any(
        f"127.0.0.1:{port}/_stcore/stream" in u for u in requested
    )  # the pages' data came over loopback
