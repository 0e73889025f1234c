"""Every remote call ends within its bound whatever the server does (issue 31): a server that never
replies, one that trickles its reply, one whose reply is too large, one that speaks another protocol
major version; a timed-out attempt is never tried again uncounted; the error line names the URL, the
call, the attempts and the time taken. Also the delayed-ACK wait (issue 30): the harness removes it for
a server that writes headers and body apart, and warns once when it cannot."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from clonemem.memory.base import BuildContext, QuestionView
from clonemem.memory.errors import MemorySystemFailed
from clonemem.memory.remote import RemoteOptions, remote_system
from clonemem.memory.transport import QUICKACK
from clonemem.schemas.config import EvaluationConfig
from tests.memory_kit import REMOTE, day
from tests.protocol_kit import INFO, Raw, json_reply, raw

ROOT = Path(__file__).resolve().parents[1]
QUICK = RemoteOptions(
    timeout_s=0.6, retries=2, concurrency=2
)  # a call's bound: 3 × 0.6 + 0.25 + 0.5 s


def _ctx() -> BuildContext:
    return BuildContext(llm=None, persona_id="p")  # type: ignore[arg-type]  # a remote system calls no LLM


def _ask(url: str, options: RemoteOptions = QUICK) -> None:
    memory = remote_system(None, url, options)()
    memory.reset(_ctx())
    memory.ingest(REMOTE, _ctx())
    memory.retrieve(QuestionView("q1", "is remote work productive?", day("2023-06-01T00:00:00")), 3)


def _failure(url: str, options: RemoteOptions = QUICK) -> tuple[str, float]:
    started = time.monotonic()
    with pytest.raises(MemorySystemFailed) as err:
        _ask(url, options)
    return str(err.value), time.monotonic() - started


def _answer_but(stuck_path: str, misbehave) -> Raw:  # (conn) -> None
    """A server that answers every call properly but ``stuck_path``, where it does ``misbehave(conn)``."""
    server: Raw

    def reply(method: str, path: str, conn: socket.socket) -> None:
        if path == stuck_path:
            misbehave(conn)
        elif path == "/v1/info":
            json_reply(conn, INFO)
        elif path == "/v1/query":
            json_reply(conn, {"items": []})
        else:
            conn.sendall(b"HTTP/1.1 204 No Content\r\n\r\n")

    server = Raw(reply)
    return server


def test_the_bound_with_default_settings_is_the_one_the_readme_states() -> None:
    cfg = EvaluationConfig()
    options = RemoteOptions(timeout_s=cfg.remote_timeout_s, retries=cfg.remote_retries)
    assert options.call_bound_s() == 241.75
    readme = (ROOT / "README.md").read_text("utf-8")
    section = readme[readme.index("### Remote memory systems: bounds") :]
    assert "241.75 s" in section[:4000] and "4 attempts" in section[:4000]


def test_a_server_that_never_replies_fails_at_the_bound_without_an_extra_attempt() -> None:
    server = _answer_but("/v1/query", lambda conn: server.wait(30))
    with raw(server) as url:
        text, took = _failure(url)
    bound = QUICK.call_bound_s()
    assert 3 * QUICK.timeout_s <= took <= bound + 0.5, took
    # on the kept-alive connection first, then on fresh ones: three attempts, never a fourth uncounted one
    assert server.requests.count("POST /v1/query") == 3, server.requests
    assert "\n" not in text
    assert re.fullmatch(
        rf"memory system 'raw': {url}: POST /v1/query: failed after 3 attempts in \d+\.\d s: no complete reply "
        r"within evaluation.remote_timeout_s = 0.6 s per attempt",
        text,
    ), text


def test_a_reply_trickled_byte_by_byte_fails_at_the_deadline_not_per_read() -> None:
    def trickle(conn: socket.socket) -> None:
        data = json.dumps({"items": []}).encode()
        conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Length: {len(data)}\r\n\r\n".encode())
        for byte in data:  # each byte well within the per-read timeout, the whole far beyond it
            if server.stop.is_set():
                return
            conn.sendall(bytes([byte]))
            server.wait(0.2)

    server = _answer_but("/v1/query", trickle)
    with raw(server) as url:
        text, took = _failure(url, RemoteOptions(timeout_s=1.0, retries=0))
    assert 1.0 <= took <= 1.6, took
    assert (
        "POST /v1/query: failed after 1 attempt in " in text
        and "within evaluation.remote_timeout_s = 1 s" in text
    )


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "until-closed"])
def test_a_reply_over_the_size_limit_is_refused_naming_the_limit(declared: bool) -> None:
    limit = 64 * 1024
    sent = []

    def flood(conn: socket.socket) -> None:
        size = 50 * 1024 * 1024
        head = (
            f"HTTP/1.1 200 OK\r\nContent-Length: {size}\r\n\r\n"
            if declared
            else "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n"
        )
        conn.sendall(head.encode())
        chunk = b"x" * 65536
        total = 0
        try:
            while total < size and not server.stop.is_set():
                conn.sendall(chunk)
                total += len(chunk)
        finally:
            sent.append(total)
            conn.close()

    server = _answer_but("/v1/query", flood)
    with raw(server) as url:
        text, took = _failure(url, RemoteOptions(timeout_s=30, retries=3, max_reply_bytes=limit))
    assert took < 5, took  # refused at once, never tried again
    assert server.requests.count("POST /v1/query") == 1
    assert (
        f"POST /v1/query: the reply is larger than evaluation.remote_max_reply_bytes = {limit} bytes"
        in text
    )
    assert ("its Content-Length is 52428800" in text) == declared
    # the client stopped reading at the limit: the server could not push 50 MB into the connection
    deadline = time.monotonic() + 5
    while not sent and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sent and sent[0] < 10 * 1024 * 1024, sent


def test_the_default_reply_limit_is_a_few_megabytes() -> None:
    assert 1024 * 1024 <= EvaluationConfig().remote_max_reply_bytes <= 16 * 1024 * 1024
    assert RemoteOptions().max_reply_bytes == EvaluationConfig().remote_max_reply_bytes


def test_an_unknown_protocol_major_version_is_refused_naming_it() -> None:
    server = Raw(lambda method, path, conn: json_reply(conn, {**INFO, "protocol": "2.0"}))
    with raw(server) as url, pytest.raises(MemorySystemFailed) as err:
        remote_system(None, url, QUICK)
    assert str(err.value) == (
        f"memory system '{url}': {url}: GET /v1/info: reply field protocol: memory protocol 2.0 "
        "is not supported: this end reads 1.x (up to 1.2)"
    )


def test_a_reply_in_an_unknown_major_format_version_is_refused() -> None:
    server = _answer_but(
        "/v1/query", lambda conn: json_reply(conn, {"format_version": "3.0", "items": []})
    )
    with raw(server) as url:
        text, _ = _failure(url)
    assert text.endswith(
        "POST /v1/query: reply field format_version: memory protocol 3.0 is not supported: "
        "this end reads 1.x (up to 1.2)"
    ), text


def test_older_minor_versions_and_a_missing_version_are_read() -> None:
    answers = {
        "/v1/info": {**INFO, "protocol": "1.0"},
        "/v1/query": {"format_version": "1.1", "items": []},
    }

    def reply(method: str, path: str, conn: socket.socket) -> None:
        if path in answers:
            json_reply(conn, answers[path])
        else:
            conn.sendall(b"HTTP/1.1 204 No Content\r\n\r\n")

    with raw(Raw(reply)) as url:
        cls = remote_system(None, url, QUICK)
        _ask(url)
    assert cls.provenance_extra["protocol"] == "1.0"


def test_a_failed_call_stops_the_calls_in_flight_to_the_same_server() -> None:
    """A stuck server ends the evaluation within one call's bound, not one per persona in the queue."""
    server = _answer_but("/v1/reset", lambda conn: server.wait(30))
    with raw(server) as url:
        cls = remote_system(None, url, RemoteOptions(timeout_s=0.5, retries=0, concurrency=4))
        errors: list[float] = []

        def one() -> None:
            started = time.monotonic()
            with pytest.raises(MemorySystemFailed):
                cls().reset(_ctx())
            errors.append(time.monotonic() - started)

        threads = [threading.Thread(target=one) for _ in range(8)]
        started = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join(20)
        took = time.monotonic() - started
    assert len(errors) == 8 and took < 1.5, (took, errors)  # 8 personas, 4 slots: not 2 × 0.5 s


def test_waiting_for_a_free_slot_is_no_part_of_a_calls_bound() -> None:
    """A slow but healthy server and one call in flight at a time: the calls queued behind it still get
    their whole deadline once they are sent."""

    def slow(conn: socket.socket) -> None:
        server.wait(0.3)
        json_reply(conn, {"items": []})

    server = _answer_but("/v1/query", slow)
    with raw(server) as url:
        cls = remote_system(None, url, RemoteOptions(timeout_s=0.6, retries=0, concurrency=1))
        memory = cls()
        memory.reset(_ctx())
        failures: list[Exception] = []

        def one(n: int) -> None:
            try:
                memory.retrieve(QuestionView(f"q{n}", "anything", day("2023-06-01T00:00:00")), 3)
            except MemorySystemFailed as exc:
                failures.append(exc)

        threads = [
            threading.Thread(target=one, args=(n,)) for n in range(4)
        ]  # the last waits ~0.9 s
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
    assert not failures, failures
    assert server.requests.count("POST /v1/query") == 4


# -- the delayed-ACK wait ----------------------------------------------------------------------------


class _Plain(BaseHTTPRequestHandler):
    """What a stranger writes first: the standard library's handler, Nagle's algorithm left on."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def _reply(self, status: int, body: dict | None) -> None:
        data = json.dumps(body).encode() if body is not None else b""
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()  # the headers leave in one write ...
        self.wfile.write(data)  # ... the body in a second

    def do_GET(self) -> None:
        self._reply(200, INFO)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._reply(
            200 if self.path == "/v1/query" else 204,
            {"items": []} if self.path == "/v1/query" else None,
        )


def _plain_latencies(options: RemoteOptions, n: int = 15) -> list[float]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Plain)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        memory = remote_system(None, f"http://127.0.0.1:{server.server_address[1]}", options)()
        memory.reset(_ctx())
        out = []
        for i in range(n):
            t0 = time.perf_counter()
            memory.retrieve(QuestionView(f"q{i}", "anything", day("2023-06-01T00:00:00")), 3)
            out.append((time.perf_counter() - t0) * 1000)
        return out
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.skipif(QUICKACK is None, reason="TCP_QUICKACK is Linux's")
def test_a_plain_stdlib_server_answers_without_the_40_ms_wait(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, "clonemem.memory.remote"):
        ms = sorted(_plain_latencies(QUICK))
    assert ms[len(ms) // 2] < 20, ms  # 44 ms a call with the standard library's client
    assert not caplog.records


@pytest.mark.skipif(QUICKACK is None, reason="TCP_QUICKACK is Linux's")
def test_the_40_ms_pattern_is_warned_of_once_per_run(caplog: pytest.LogCaptureFixture) -> None:
    slow = QUICK.model_copy(update={"quickack": False})  # as on a system without TCP_QUICKACK
    with caplog.at_level(logging.WARNING, "clonemem.memory.remote"):
        ms = sorted(_plain_latencies(slow, 6))
    assert ms[len(ms) // 2] >= 30, ms
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 1 and "set TCP_NODELAY" in warned[0] and "~40 ms" in warned[0], warned


# -- the whole evaluation, default settings ---------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_an_evaluation_against_a_stuck_server_ends_within_the_readme_bound_with_defaults(
    tmp_path: Path,
) -> None:
    """Default settings (60 s per attempt, 3 retries): the bound is 241.75 s per call, and with the
    other personas' calls cut off, for the evaluation (after the process's start)."""
    from clonemem.demo import fixture_files

    wh = tmp_path / "wh.duckdb"
    exe = str(Path(sys.executable).with_name("clonemem"))
    env = {**os.environ, "PREFECT_HOME": str(tmp_path / "prefect")}
    imported = subprocess.run(
        [
            exe,
            "--warehouse",
            str(wh),
            "import",
            "release",
            *map(str, fixture_files()),
            "--name",
            "fx",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert imported.returncode == 0, imported.stderr
    server = _answer_but("/v1/reset", lambda conn: server.wait(600))
    with raw(server) as url:
        started = time.monotonic()
        proc = subprocess.Popen(
            [exe, "--warehouse", str(wh), "evaluate", "fx", "--systems", url, "--force"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        try:
            _, err = proc.communicate(timeout=400)
        finally:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
        ended = time.monotonic()
    assert proc.returncode == 5, err
    # from the first reset sent to the process's end: the call's bound and the process's exit (the
    # process's start, Prefect's server and the benchmark's loading come before, and vary with the load)
    took = ended - server.received[server.requests.index("POST /v1/reset")]
    print(
        f"stuck server, default settings: {took:.1f} s from the first reset to exit 5, "
        f"{ended - started:.1f} s in all (load {os.getloadavg()[0]:.1f})"
    )
    assert 240 <= took <= 241.75 + 15, (took, ended - started)
    assert server.requests.count("POST /v1/reset") == 4
    line = next(ln for ln in err.splitlines() if "POST /v1/reset" in ln)
    assert re.search(
        rf"{url}: POST /v1/reset: failed after 4 attempts in 24[01]\.\d s: no complete reply within "
        r"evaluation.remote_timeout_s = 60 s per attempt",
        line,
    ), line
