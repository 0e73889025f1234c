"""``python -m clonemem.dashboard.serve run APP ...``: Streamlit's own command line, with two things
Streamlit does not do, installed before it starts.

1. **Only the bound address may talk to the server.** Every HTTP request and WebSocket handshake whose
   ``Host`` is not ``127.0.0.1:PORT`` or ``localhost:PORT``, whose ``Origin`` (when sent) is not
   ``http://`` one of those, or that the browser marks as coming from another site
   (``Sec-Fetch-Site: cross-site`` or ``same-site``: another port of localhost is the same site) is
   refused with 403 before Streamlit sees it. Streamlit accepts any ``Host`` and takes a same-host
   ``Origin`` as same-origin, which lets a DNS-rebinding page (``evil.example:PORT`` resolving to
   127.0.0.1) read every page; and with CORS on it still allows any localhost origin, whatever its port.

   Why an ASGI middleware around the app Streamlit builds, in its own process: it sees every request,
   the WebSocket included, before routing, and reads the port from the socket the request came in on.
   A reverse proxy in front would leave Streamlit's own port open on loopback to exactly the pages it
   should keep out, and would have to relay WebSockets. If Streamlit stops building its app through
   ``create_starlette_app``, the dashboard refuses to start rather than run unguarded.

2. **No outbound request.** Streamlit looks up the machine's addresses to print "Network URL" and
   "External URL" and to widen its list of allowed origins: a UDP socket "connected" to 8.8.8.8, and an
   HTTP request to checkip.amazonaws.com (on a refused cross-origin connection, too). An offline tool
   has no address to discover: both lookups answer "none". (Usage statistics, the browser and the
   file watcher are off on the command line: ``clonemem.dashboard.command``.)
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
ASGIApp = Callable[
    [Scope, Callable[[], Awaitable[dict]], Callable[[dict], Awaitable[None]]], Awaitable[None]
]

LOOPBACK_NAMES = ("127.0.0.1", "localhost")


def refusal(scope: Scope, port: int) -> str | None:
    """Why a request may not reach the dashboard (None: it may). ``port`` is the one it came in on."""
    headers: dict[bytes, bytes] = {}
    for name, value in scope.get("headers", ()):
        headers.setdefault(name.lower(), value)
    hosts = {f"{name}:{port}" for name in LOOPBACK_NAMES}
    host = headers.get(b"host", b"").decode("latin-1").lower()
    if host not in hosts:
        return f"Host {host or '(none)'!r} is not this server's address"
    origin = headers.get(b"origin")
    if origin is not None and origin.decode("latin-1").lower() not in {
        f"http://{h}" for h in hosts
    }:
        return f"Origin {origin.decode('latin-1')!r} is not this server's address"
    if headers.get(b"sec-fetch-site", b"").lower() in {b"cross-site", b"same-site"}:
        return "the request comes from another site"
    return None


class LoopbackOnly:
    """ASGI middleware: refuse what :func:`refusal` refuses, with 403 (HTTP) or a refused handshake."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(
        self,
        scope: Scope,
        receive: Callable[[], Awaitable[dict]],
        send: Callable[[dict], Awaitable[None]],
    ) -> None:
        if scope["type"] in ("http", "websocket"):
            reason = refusal(scope, _port(scope))
            if reason is not None:
                if (
                    scope["type"] == "websocket"
                ):  # a close before accept: the server answers the handshake 403
                    await send({"type": "websocket.close", "code": 1008, "reason": "refused"})
                    return
                body = f"refused: {reason}\n".encode()
                await send(
                    {
                        "type": "http.response.start",
                        "status": 403,
                        "headers": [
                            (b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(body)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def _port(scope: Scope) -> int:
    server = scope.get("server")
    if server and len(server) > 1 and server[1]:
        return int(server[1])
    from streamlit import config

    return int(config.get_option("server.port"))


def install() -> None:
    """Wrap the app Streamlit serves in :class:`LoopbackOnly`, and silence its address lookups."""
    from streamlit import net_util
    from streamlit.web.server.starlette import starlette_server

    build = getattr(starlette_server, "create_starlette_app", None)
    if build is None:
        raise SystemExit(
            "error: this Streamlit does not build its server app through create_starlette_app; the "
            "dashboard will not start without its Host/Origin guard (see clonemem/dashboard/serve.py)"
        )

    def guarded_app(*args: Any, **kwargs: Any) -> ASGIApp:
        return LoopbackOnly(build(*args, **kwargs))

    # Streamlit's own app builder, wrapped (setattr: mypy forbids replacing a module's function)
    setattr(starlette_server, "create_starlette_app", guarded_app)
    net_util.get_internal_ip = lambda: None
    net_util.get_external_ip = lambda: None


def main() -> None:
    install()
    from streamlit.web.cli import main as streamlit_main

    sys.argv = ["streamlit", *sys.argv[1:]]
    streamlit_main(prog_name="streamlit")


if __name__ == "__main__":
    main()
