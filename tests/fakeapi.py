"""Loopback HTTP servers that speak the Anthropic, OpenAI and Gemini wire formats.

Each server replays a script of replies (status, JSON body, headers) and records the requests it
got, so tests drive the real SDK code paths: success, 429 with retry-after, 500, malformed model
output, authentication errors.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    at: float = field(
        default_factory=time.monotonic
    )  # when it came (this process's monotonic clock)


class Flavor:
    name: str

    def base_url(self, port: int) -> str:
        raise NotImplementedError

    def ok(self, text: str, model: str) -> Reply:
        raise NotImplementedError

    def error(self, status: int, message: str) -> Reply:
        raise NotImplementedError


class AnthropicFlavor(Flavor):
    name = "anthropic"

    def base_url(self, port: int) -> str:
        return f"http://127.0.0.1:{port}"

    def ok(self, text: str, model: str) -> Reply:
        return Reply(
            200,
            {
                "id": "msg_fake",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [{"type": "text", "text": text}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 31, "output_tokens": 9},
            },
        )

    def error(self, status: int, message: str) -> Reply:
        kind = {401: "authentication_error", 429: "rate_limit_error", 500: "api_error"}.get(
            status, "invalid_request_error"
        )
        return Reply(status, {"type": "error", "error": {"type": kind, "message": message}})


class OpenAIFlavor(Flavor):
    name = "openai"

    def base_url(self, port: int) -> str:
        return f"http://127.0.0.1:{port}/v1"

    def ok(self, text: str, model: str) -> Reply:
        return Reply(
            200,
            {
                "id": "chatcmpl-fake",
                "object": "chat.completion",
                "created": 1700000000,
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 31, "completion_tokens": 9, "total_tokens": 40},
            },
        )

    def error(self, status: int, message: str) -> Reply:
        code = {401: "invalid_api_key", 429: "rate_limit_exceeded"}.get(status)
        return Reply(
            status, {"error": {"message": message, "type": "error", "param": None, "code": code}}
        )


class GeminiFlavor(Flavor):
    name = "gemini"

    def base_url(self, port: int) -> str:
        return f"http://127.0.0.1:{port}/"

    def ok(self, text: str, model: str) -> Reply:
        return Reply(
            200,
            {
                "candidates": [
                    {
                        "content": {"role": "model", "parts": [{"text": text}]},
                        "finishReason": "STOP",
                        "index": 0,
                    }
                ],
                "usageMetadata": {
                    "promptTokenCount": 31,
                    "candidatesTokenCount": 9,
                    "totalTokenCount": 40,
                },
                "modelVersion": model,
            },
        )

    def error(self, status: int, message: str) -> Reply:
        st = {
            401: "UNAUTHENTICATED",
            403: "PERMISSION_DENIED",
            429: "RESOURCE_EXHAUSTED",
            500: "INTERNAL",
        }.get(status, "INVALID_ARGUMENT")
        return Reply(status, {"error": {"code": status, "message": message, "status": st}})


FLAVORS: dict[str, Flavor] = {
    f.name: f for f in (AnthropicFlavor(), OpenAIFlavor(), GeminiFlavor())
}


class FakeAPIServer:
    def __init__(self, flavor: str) -> None:
        self.flavor = FLAVORS[flavor]
        self.script: deque[Reply] = deque()
        self.always: Reply | None = None  # the reply to every request once the script is used up
        self.stuck = (
            False  # read each request, then never reply (a provider that stopped answering)
        )
        self.seen: list[Seen] = []
        self._released = threading.Event()  # set on exit: the stuck handlers end
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except json.JSONDecodeError:
                    body = raw.decode("utf-8", "replace")
                server.seen.append(
                    Seen("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                )
                if server.stuck:
                    server._released.wait()
                    self.close_connection = True
                    return
                reply = (
                    server.script.popleft()
                    if server.script
                    else server.always or Reply(599, {"error": "script exhausted"})
                )
                data = (
                    reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()
                )
                self.send_response(reply.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for k, v in reply.headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return self.flavor.base_url(self._httpd.server_address[1])

    def push(self, *replies: Reply) -> None:
        self.script.extend(replies)

    def __enter__(self) -> FakeAPIServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._released.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)
