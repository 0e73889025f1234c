"""HTTP/1.1 on kept-alive sockets for the memory protocol's client, every wait bounded.

The standard library's client bounds each read, not a call: a reply trickled one byte at a time passes
any timeout, and a reply is read whole whatever its size. Here an attempt has one deadline (connect,
send, every byte of the reply) and a reply one size limit, both checked at every read, so a call ends
when its deadline passes or its reply grows past the limit, whatever the server does.

Each request leaves in one write, with TCP_NODELAY. On Linux the socket also asks for an immediate ACK
(TCP_QUICKACK) before each read: a server that writes its reply's headers and body in two writes
(Python's ``BaseHTTPRequestHandler`` does) without TCP_NODELAY holds the body until the headers are
ACKed, which a delayed ACK postpones by 40 ms (measured in docs/memory-protocol.md). Replies that still
show that wait (another system, QUICKACK not available) are counted in ``Reply.split_wait``.
"""

from __future__ import annotations

import socket
import ssl
import time
from dataclasses import dataclass

HEADER_LIMIT = 64 * 1024  # bytes of status line and headers
READ_CHUNK = 64 * 1024
QUICKACK: int | None = getattr(socket, "TCP_QUICKACK", None)  # Linux only
# a body that arrives this long after headers that came alone: the delayed-ACK wait (40 ms on Linux,
# up to 200 ms elsewhere)
SPLIT_WAIT_S = (0.030, 0.250)


class TransportFailed(Exception):
    """No complete reply: refused, reset, timed out. ``stale``: a kept-alive connection the server had
    closed (nothing was read), which a fresh connection may try at once without counting an attempt."""

    def __init__(self, kind: str, detail: str, stale: bool = False) -> None:
        super().__init__(f"{kind} ({detail})")
        self.kind, self.detail, self.stale = kind, detail, stale


class ReplyTooLarge(Exception):
    """The reply's body is larger than the limit; no more than the limit was read."""

    def __init__(self, limit: int, declared: int | None) -> None:
        super().__init__(f"larger than {limit} bytes")
        self.limit, self.declared = limit, declared


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes
    keep_alive: bool
    split_wait: bool  # the body came 30-250 ms after headers that arrived alone: a delayed-ACK wait


class _Deadline:
    def __init__(self, at: float) -> None:
        self.at = at

    def left(self) -> float:
        left = self.at - time.monotonic()
        if left <= 0:
            raise TimeoutError("the deadline passed")
        return left


class Connection:
    """One socket to a server; requests on it one at a time."""

    def __init__(self, host: str, port: int, https: bool, quickack: bool = True) -> None:
        self.host, self.port, self.https = host, port, https
        self.quickack = QUICKACK if quickack else None
        self.sock: socket.socket | None = None

    def close(self) -> None:
        if self.sock is not None:
            try:
                self.sock.close()
            finally:
                self.sock = None

    def _open(self, deadline: _Deadline) -> socket.socket:
        sock = socket.create_connection((self.host, self.port), timeout=deadline.left())
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.https:
            context = ssl.create_default_context()
            sock.settimeout(deadline.left())
            sock = context.wrap_socket(sock, server_hostname=self.host)
        return sock

    def request(
        self,
        method: str,
        target: str,
        headers: dict[str, str],
        body: bytes | None,
        deadline_at: float,
        max_body: int,
    ) -> Reply:
        """Send one request and read its whole reply before ``deadline_at`` (``time.monotonic()``); a
        body over ``max_body`` bytes raises :class:`ReplyTooLarge`, a transport failure or the deadline
        :class:`TransportFailed` (the connection is closed then)."""
        deadline = _Deadline(deadline_at)
        reused = self.sock is not None
        reader: _Reader | None = None
        try:
            if self.sock is None:
                self.sock = self._open(deadline)
            head = [f"{method} {target} HTTP/1.1", f"Host: {self.host}:{self.port}"]
            head += [f"{k}: {v}" for k, v in headers.items()]
            if body is not None:
                head.append(f"Content-Length: {len(body)}")
            wire = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + (body or b"")
            self.sock.settimeout(deadline.left())
            self.sock.sendall(wire)  # one write: no request waits on Nagle's algorithm
            reader = _Reader(self.sock, deadline, self.quickack)
            reply = reader.reply(method, max_body)
        except ReplyTooLarge:
            self.close()
            raise
        except TimeoutError as exc:
            self.close()
            raise TransportFailed("timed out", str(exc) or "timed out") from None
        except ValueError as exc:
            self.close()
            raise TransportFailed("unreadable", f"not HTTP/1.1: {exc}") from None
        except (OSError, _Closed) as exc:
            self.close()
            # nothing came back on a kept-alive connection: the server closed it while idle
            stale = (
                reused
                and (reader is None or not reader.got)
                and isinstance(exc, (_Closed, ConnectionResetError, BrokenPipeError))
            )
            detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            raise TransportFailed("unreachable", detail, stale=stale) from None
        if not reply.keep_alive:
            self.close()
        return reply


class _Closed(Exception):
    """The server closed the connection before a complete reply."""


class _Reader:
    def __init__(self, sock: socket.socket, deadline: _Deadline, quickack: int | None) -> None:
        self.sock, self.deadline, self.quickack = sock, deadline, quickack
        self.buf = b""
        self.got = False  # any byte of the reply arrived
        self.last_read = time.monotonic()

    def _recv(self, n: int = READ_CHUNK) -> bytes:
        self.sock.settimeout(
            self.deadline.left()
        )  # the whole attempt's time left, not a fresh timeout
        if self.quickack is not None:  # not sticky: asked again before every read
            self.sock.setsockopt(socket.IPPROTO_TCP, self.quickack, 1)
        data = self.sock.recv(n)
        self.last_read = time.monotonic()
        self.got = self.got or bool(data)
        return data

    def _fill(self, n: int = READ_CHUNK) -> None:
        data = self._recv(n)
        if not data:
            raise _Closed("the server closed the connection before its reply was complete")
        self.buf += data

    def reply(self, method: str, max_body: int) -> Reply:
        while b"\r\n\r\n" not in self.buf:
            if len(self.buf) > HEADER_LIMIT:
                raise ValueError(f"reply headers longer than {HEADER_LIMIT} bytes")
            self._fill()
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        headers_at, alone = self.last_read, not self.buf
        lines = head.decode("latin-1").split("\r\n")
        version, _, rest = lines[0].partition(" ")
        if not version.startswith("HTTP/") or not rest[:3].isdigit():
            raise ValueError(f"not an HTTP reply: {lines[0][:80]!r}")
        status = int(rest[:3])
        fields: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            fields[name.strip().lower()] = value.strip()
        connection = fields.get("connection", "").lower()
        keep = connection != "close" if version == "HTTP/1.1" else connection == "keep-alive"
        if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
            body = b""
        elif "chunked" in fields.get("transfer-encoding", "").lower():
            body = self._chunked(max_body)
        elif "content-length" in fields:
            body = self._sized(int(fields["content-length"]), max_body)
        else:  # the body ends when the server closes
            keep, body = False, self._until_closed(max_body)
        low, high = SPLIT_WAIT_S
        split = alone and bool(body) and low <= self.last_read - headers_at <= high
        return Reply(status, body, keep and not self.buf, split)

    def _sized(self, length: int, max_body: int) -> bytes:
        if length > max_body:
            raise ReplyTooLarge(max_body, length)  # refused before reading it
        while len(self.buf) < length:
            self._fill(min(READ_CHUNK, length - len(self.buf)))
        body, self.buf = self.buf[:length], self.buf[length:]
        return body

    def _until_closed(self, max_body: int) -> bytes:
        while True:
            if len(self.buf) > max_body:
                raise ReplyTooLarge(max_body, None)
            data = self._recv(min(READ_CHUNK, max_body + 1 - len(self.buf)))
            if not data:
                return self.buf
            self.buf += data

    def _chunked(self, max_body: int) -> bytes:
        body = b""
        while True:
            while b"\r\n" not in self.buf:
                if len(self.buf) > HEADER_LIMIT:
                    raise ValueError("a chunk size line is too long")
                self._fill()
            line, _, self.buf = self.buf.partition(b"\r\n")
            size = int(line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while b"\r\n" not in self.buf:  # trailers end with an empty line
                    self._fill()
                while not self.buf.startswith(b"\r\n"):
                    _, _, self.buf = self.buf.partition(b"\r\n")
                    while b"\r\n" not in self.buf:
                        self._fill()
                self.buf = self.buf[2:]
                return body
            if len(body) + size > max_body:
                raise ReplyTooLarge(max_body, None)
            while len(self.buf) < size + 2:
                self._fill(min(READ_CHUNK, size + 2 - len(self.buf)))
            body += self.buf[:size]
            self.buf = self.buf[size + 2 :]
