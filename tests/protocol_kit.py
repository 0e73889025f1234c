"""Memory-protocol servers for the tests: the real ones as subprocesses (`clonemem serve-memory`, the
stdlib example) on free ports, and a faulty one in a thread, broken in one chosen way."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXE = str(Path(sys.executable).with_name("clonemem"))
STDLIB_SERVER = ROOT / "examples" / "memory-server-stdlib" / "server.py"


@contextmanager
def serving(argv: list[str], timeout: float = 60) -> Iterator[str]:
    """Start a server that prints its URL on its first line (``... at http://127.0.0.1:PORT ...``);
    yield the URL; stop it (by its own pid) at the end."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        url = next((w for w in line.split() if w.startswith("http://")), None)
        if url is None:
            proc.kill()
            raise RuntimeError(
                f"{argv[:3]} did not start: {line!r} {proc.stderr.read() if proc.stderr else ''}"
            )
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def serve_memory(system: str, log: Path | None = None) -> Iterator[str]:
    return serving(
        [EXE, "serve-memory", system, "--port", "0", *(["--log", str(log)] if log else [])]
    )


def stdlib_server(log: Path | None = None) -> Iterator[str]:
    return serving(
        [sys.executable, str(STDLIB_SERVER), "--port", "0", *(["--log", str(log)] if log else [])]
    )


def free_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Faulty:
    """A protocol server (word-free: it returns its traces in order) with one fault:

    - ``status_on``: (path, status) — that call answers with that status;
    - ``garbage_on``: path — that call answers 200 with a body that is not JSON;
    - ``drop_field``: field — query items lack it;
    - ``fail_first``: n — the first n calls answer 503 (then it behaves);
    - ``extra_trace``: query items name a trace never sent;
    - ``ready_after``: n — it indexes asynchronously (``/v1/info`` features ``async_indexing``) and says
      ``GET /v1/ready`` only at the n-th poll after an ingest (a huge n: never);
    - ``refuse_query``: n — the n-th ``POST /v1/query`` is answered 400 (once), as if the run stopped there.
    """

    def __init__(
        self,
        status_on: tuple[str, int] | None = None,
        garbage_on: str | None = None,
        drop_field: str | None = None,
        fail_first: int = 0,
        extra_trace: bool = False,
        stored: bool = True,
        ready_after: int | None = None,
        refuse_query: int | None = None,
    ) -> None:
        self.status_on, self.garbage_on, self.drop_field = status_on, garbage_on, drop_field
        self.fail_first, self.extra_trace, self.stored = fail_first, extra_trace, stored
        self.ready_after, self.polls = ready_after, 0
        self.refuse_query, self.answered = refuse_query, 0  # queries answered 200
        self.calls: list[str] = []
        self.traces: dict[str, list[dict]] = {}

    def answer(self, method: str, path: str, body: dict) -> tuple[int, bytes]:
        self.calls.append(f"{method} {path}")
        if len(self.calls) <= self.fail_first:
            return 503, b'{"error": "warming up"}'
        if self.status_on and self.status_on[0] == path:
            return self.status_on[1], b'{"error": "refused by the test"}'
        if self.garbage_on == path:
            return 200, b"<html>not json</html>"
        if path == "/v1/info":
            if self.ready_after is not None:
                return (
                    200,
                    b'{"name": "faulty", "version": "0", "protocol": "1.2", "features": ["async_indexing"]}',
                )
            return 200, b'{"name": "faulty", "version": "0"}'
        if path == "/v1/reset":
            self.traces[body["persona_id"]] = []
            return 204, b""
        if path == "/v1/ingest":
            self.traces[body["persona_id"]] += body["traces"]
            self.polls = 0
            return 204, b""
        if path == "/v1/ready":
            self.polls += 1
            return 200, json.dumps(
                {"ready": self.ready_after is not None and self.polls >= self.ready_after}
            ).encode()
        if path == "/v1/query" and self.calls.count("POST /v1/query") == self.refuse_query:
            return 400, b'{"error": "stopped here by the test"}'
        if path in ("/v1/query", "/v1/stored"):
            return self._items(path, body)
        return 404, b'{"error": "no such call"}'

    def _items(self, path: str, body: dict) -> tuple[int, bytes]:
        if path == "/v1/stored" and not self.stored:
            return 404, b'{"error": "no such call"}'
        held = self.traces.get(body.get("persona_id", ""), [])
        items = [{"text": t["content"], "trace_ids": [t["trace_id"]], "score": 1.0} for t in held][
            -body.get("k", 10**6) :
        ]
        if self.extra_trace and items:
            items[0]["trace_ids"].append("never-sent")
        if self.drop_field:
            for item in items:
                item.pop(self.drop_field, None)
        self.answered += path == "/v1/query"
        return 200, json.dumps({"items": items}).encode()


@contextmanager
def faulty(server: Faulty) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def _go(self, method: str) -> None:
            from urllib.parse import parse_qs, urlsplit

            url = urlsplit(self.path)
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = json.loads(raw) if raw else {k: v[0] for k, v in parse_qs(url.query).items()}
            status, data = server.answer(method, url.path, body)
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._go("GET")

        def do_POST(self) -> None:
            self._go("POST")

    http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    http.daemon_threads = True
    thread = threading.Thread(target=http.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{http.server_address[1]}"
    finally:
        http.shutdown()
        http.server_close()


# -- servers that misbehave below HTTP: for the bounds of a remote call ------------------------------


class Raw:
    """A server on 127.0.0.1 answering each request with ``reply(method, path, sock)``, which writes what
    it likes on the socket (or nothing, and waits). Counts the requests it got by ``METHOD path``."""

    def __init__(self, reply) -> None:  # (method, path, socket) -> None
        self.reply = reply
        self.requests: list[str] = []
        self.received: list[float] = []  # time.monotonic() of each request
        self.connections = 0
        self.stop = threading.Event()

    def _serve(self, conn: socket.socket) -> None:
        buf = b""
        with conn:
            while not self.stop.is_set():
                while b"\r\n\r\n" not in buf:
                    try:
                        data = conn.recv(65536)
                    except OSError:
                        return
                    if not data:
                        return
                    buf += data
                head, _, buf = buf.partition(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path = lines[0].split(" ")[:2]
                length = next(
                    (
                        int(v)
                        for k, _, v in (ln.partition(":") for ln in lines[1:])
                        if k.strip().lower() == "content-length"
                    ),
                    0,
                )
                while len(buf) < length:
                    buf += conn.recv(65536)
                buf = buf[length:]
                self.requests.append(f"{method} {path.split('?')[0]}")
                self.received.append(time.monotonic())
                try:
                    self.reply(method, path.split("?")[0], conn)
                except OSError:
                    return

    def wait(self, seconds: float) -> None:
        """Sleep, but end early when the server stops (a test is over)."""
        self.stop.wait(seconds)


def json_reply(conn: socket.socket, body: dict | bytes, status: int = 200) -> None:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    conn.sendall(
        f"HTTP/1.1 {status} OK\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n".encode()
        + data
    )


INFO = {"name": "raw", "version": "0"}


@contextmanager
def raw(server: Raw) -> Iterator[str]:
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.2)

    def accept() -> None:
        while not server.stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            server.connections += 1
            threading.Thread(target=server._serve, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        server.stop.set()
        thread.join(5)
        listener.close()
