"""Prefect settings for local runs on a small machine with no network.

Must run before ``import prefect``: Prefect reads its settings at import time. Every value is a
default, so anything the user exports wins.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from clonemem.errors import causes
from clonemem.thirdparty import written_for

DEFAULTS = {
    # The ephemeral server takes 10-20 s to start on 2 cores; the default timeout (20 s) is too tight.
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "DO_NOT_TRACK": "1",
    "PREFECT_CLOUD_ENABLE_ORCHESTRATION_TELEMETRY": "false",
    # The CLI prints its own summaries; Prefect's INFO lines would bury them.
    "PREFECT_LOGGING_LEVEL": "WARNING",
    # The ephemeral server logs tracebacks when it is stopped with events still queued (at exit).
    "PREFECT_LOGGING_SERVER_LEVEL": "CRITICAL",
}


def configure(*, debug: bool | None = None) -> None:
    """Set the defaults. ``debug`` is the CLI's flag: without it, Prefect logs nothing below CRITICAL (the
    CLI reports failures itself, in one line); with it, Prefect logs at INFO. ``None`` (tests, library
    use) keeps WARNING."""
    # the CLI's choice goes first: the generic defaults below only fill what is still unset
    if debug is not None:
        os.environ.setdefault("PREFECT_LOGGING_LEVEL", "INFO" if debug else "CRITICAL")
        if debug:
            os.environ.setdefault("PREFECT_LOGGING_SERVER_LEVEL", "WARNING")
        else:
            # SQLAlchemy's pool logs a traceback when a connection it lent (GX's, Prefect's) is collected
            # at exit without a clean reset ("Exception during reset or similar"): noise after the
            # command's own message; --debug keeps it
            import logging

            logging.getLogger("sqlalchemy.pool").setLevel(logging.CRITICAL)
    for key, value in DEFAULTS.items():
        os.environ.setdefault(key, value)


# -- the ephemeral server dies with this process, and only by its hand -----------------------------

# Prefect starts its temporary server with a plain Popen and stops it from an atexit hook, which a
# SIGKILL of this process never runs: the uvicorn child would stay behind, orphaned. The server is
# started instead under a tiny watchdog that holds the read end of a pipe whose write end only this
# process has; when this process dies, for any reason, the kernel closes the write end, the read
# returns EOF, and the watchdog stops the server (SIGTERM, then SIGKILL after a grace period). This
# works whichever thread started the server (PR_SET_PDEATHSIG would fire when that *thread* exits).
# The server also runs in a session of its own: a terminal's Ctrl-C goes to the whole foreground
# process group, and a server that died with it left the interrupted command failing on refused
# connections instead of stopping; this process stops it (``stop_servers``, ``clonemem.interrupts``).
_WATCHDOG = """
import os, runpy, signal, sys, threading, time
fd = int(sys.argv.pop(1))
def watch():
    while os.read(fd, 1):
        pass
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(5)
    os._exit(1)
threading.Thread(target=watch, daemon=True).start()
sys.argv[0] = "uvicorn"
runpy.run_module("uvicorn", run_name="__main__", alter_sys=True)
"""

# The version of Prefect whose server internals this module relies on (``SubprocessASGIServer``: its
# ``_run_uvicorn_command``, its arguments and environment, its ``_instances``): checked before use.
PREFECT_VERSION = "3.8.8"

_pipe_write_end: int | None = None
_pipe_read_end: int | None = None
_servers: list = []  # the server processes started here (subprocess.Popen)
_patched = False  # Prefect's server start is patched (``die_with_parent_server``)
_prefects_run_uvicorn: Any = None  # the method it replaced
# started ahead of the first flow: its API URL, process and startup timeout; then the URL in use
_early: tuple[str, subprocess.Popen, float] | None = None
_early_url: str | None = None
_early_used: tuple[str, subprocess.Popen] | None = None
# what Prefect's SubprocessASGIServer sets for its temporary server (it serves no UI)
_SERVER_ENV = {
    "PREFECT_UI_ENABLED": "0",
    "PREFECT__SERVER_EPHEMERAL": "1",
    "PREFECT__SERVER_FINAL": "1",
}


def _watchdog_pipe() -> int:
    """The read end the watchdog of every server started here holds (created once)."""
    global _pipe_write_end, _pipe_read_end
    if _pipe_read_end is None:
        _pipe_read_end, _pipe_write_end = (
            os.pipe()
        )  # both non-inheritable; the read end is passed explicitly
    return _pipe_read_end


def _popen_under_watchdog(uvicorn_args: list[str], **kwargs: Any) -> subprocess.Popen:
    """``python -m uvicorn ARGS`` as a child under the watchdog, in a session of its own."""
    read_end = _watchdog_pipe()
    process = subprocess.Popen(
        [sys.executable, "-c", _WATCHDOG, str(read_end), *uvicorn_args],
        pass_fds=(read_end,),
        start_new_session=True,
        **kwargs,
    )
    _servers.append(process)
    return process


def die_with_parent_server() -> None:
    """Make the ephemeral Prefect server a child that dies with this process (even on SIGKILL).

    Call before the first flow runs; a no-op when a real server is configured (``PREFECT_API_URL``).
    A server started by :func:`start_server_early` is the one Prefect then uses.
    """
    global _patched
    if _patched or _early is not None or os.environ.get("PREFECT_API_URL"):
        return  # (an early server is used through its URL: ``on_early_server``)
    written_for("prefect", PREFECT_VERSION, "clonemem.prefect_env (the ephemeral server's start)")
    from prefect.server.api import server as server_module
    from prefect.settings import get_current_settings

    _watchdog_pipe()

    # The method as Prefect 3.8.8 writes it, with its one Popen replaced by the watchdog's: nothing
    # global is swapped, so a Popen in another thread meanwhile is Python's own.
    def run_uvicorn_under_watchdog(self: Any) -> subprocess.Popen:
        args, env = server_command(int(self.port), get_current_settings())
        return _popen_under_watchdog(args, env=env)

    global _prefects_run_uvicorn
    _prefects_run_uvicorn = server_module.SubprocessASGIServer._run_uvicorn_command
    # a patch of the library's method, checked against its version above (setattr: mypy forbids
    # assigning to a method, which is exactly what this does on purpose)
    setattr(server_module.SubprocessASGIServer, "_run_uvicorn_command", run_uvicorn_under_watchdog)
    _patched = True


def server_command(port: int, settings: Any) -> tuple[list[str], dict[str, str]]:
    """The uvicorn arguments and the environment Prefect's ``SubprocessASGIServer`` gives the
    temporary server it starts on ``port`` (Prefect 3.8.8's ``_run_uvicorn_command``)."""
    spec = importlib.util.find_spec("prefect")
    assert spec is not None and spec.origin is not None, "prefect is imported, so it has a spec"
    args = [
        "--app-dir",
        str(Path(spec.origin).parent.parent),
        "--factory",
        "prefect.server.api.server:create_app",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "error",
        "--lifespan",
        "on",
    ]
    env = {**os.environ, **_SERVER_ENV, **settings.to_environment_variables(exclude_unset=True)}
    return args, env


# -- the ephemeral server starts while the command still loads ---------------------------------------

# A new Prefect home's temporary server takes 10-25 s to start (most of it creating its database), and
# a command's own imports and checks take 5-10 s more before its first flow asks for the server. Started
# at the command's start instead, the two overlap on the second core.


def start_server_early() -> None:
    """Start Prefect's temporary server now, for the flow this command will run, and return at once.

    Only when Prefect would start one (no API URL in its settings, ephemeral mode on). The command runs
    its flows inside :func:`on_early_server`, which waits for the server and points Prefect at it. The
    server stops at exit (or with the process, by the watchdog) like any other started here."""
    global _early
    if (
        _early is not None
        or _in_use()
        or _prefects_own_running()
        or os.environ.get("PREFECT_API_URL")
    ):
        return  # one starting, or one this process already runs (a command run in process again, as tests do)
    written_for("prefect", PREFECT_VERSION, "clonemem.prefect_env (the ephemeral server's start)")
    from prefect.settings import get_current_settings

    settings = get_current_settings()
    if settings.api.url or not settings.server.ephemeral.enabled:
        return
    port = _free_port()
    args, env = server_command(port, settings)
    _early = (
        f"http://127.0.0.1:{port}/api",
        _popen_under_watchdog(args, env=env),
        float(settings.server.ephemeral.startup_timeout_seconds),
    )
    atexit.register(stop_servers)  # after Prefect's own exit handlers (registered later, run first)


@contextmanager
def on_early_server() -> Iterator[None]:
    """Run the block's flows on the server :func:`start_server_early` started, once it answers; without
    one (or should it have exited), Prefect starts its temporary server itself, as without this.

    Prefect is told the server's URL (its own test harness does the same), so this process never
    imports Prefect's server code just to start one: that import alone took about 5 s and 70 MB."""
    global _early, _early_url, _early_used
    started, _early = _early, None
    url = _healthy(*started) if started is not None else _in_use()
    if url is None:
        if started is not None and started[1].poll() is None:
            started[1].terminate()  # did not answer in time: Prefect starts one of its own
        die_with_parent_server()
        with on_temporary_server():
            yield
        return
    from prefect.settings import PREFECT_API_URL, temporary_settings

    if started is not None:
        _early_used = (url, started[1])
    _early_url = url
    with temporary_settings(updates={PREFECT_API_URL: url}), on_temporary_server():
        yield


@contextmanager
def on_temporary_server() -> Iterator[None]:
    """Prefect's settings for the block's flows when they run on a temporary server (the one started
    here, or the one Prefect starts itself when no API URL is set); with a server of the user's, none.

    No flow-run heartbeats, unless the user set their frequency: a heartbeat tells a server that outlives
    the run that the run is still alive, and a temporary server ends with this process (the warehouse's
    own run rows say which runs crashed). Each flow run also waited for its heartbeat thread at its end,
    up to a second: a warm tiny `generate`, eight flow runs, took 10 s with them and 7 s without."""
    from prefect.settings import (
        PREFECT_FLOWS_HEARTBEAT_FREQUENCY,
        Settings,
        get_current_settings,
        temporary_settings,
    )

    url = get_current_settings().api.url
    temporary = not url or url == _early_url
    # what the user set (environment, profile), not what a block around this one set
    if not temporary or "heartbeat_frequency" in Settings().flows.model_fields_set:
        yield
        return
    with temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
        yield


def temporary_server_url() -> str | None:
    """The API URL of the temporary server started here ahead of the flows, once in use."""
    return _early_url


def _in_use() -> str | None:
    """The URL of the early server this process already used, while it runs."""
    return _early_used[0] if _early_used is not None and _early_used[1].poll() is None else None


def _prefects_own_running() -> bool:
    """Whether Prefect's own temporary server already runs in this process (a flow ran before)."""
    written_for(
        "prefect", PREFECT_VERSION, "clonemem.prefect_env (the ephemeral server's registry)"
    )
    server = sys.modules.get("prefect.server.api.server")
    instances = getattr(getattr(server, "SubprocessASGIServer", None), "_instances", {})
    return any(getattr(i, "running", False) for i in instances.values())


def _healthy(url: str, process: subprocess.Popen, timeout_s: float) -> str | None:
    """``url`` once the server answers its health check (as Prefect waits for its own); None if it exits
    or does not answer within ``timeout_s``."""
    import httpx

    deadline = time.monotonic() + timeout_s
    with httpx.Client() as client:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                return None
            try:
                if client.get(f"{url}/health").status_code == 200:
                    return url
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def stop_servers(grace_s: float = 1.5) -> None:
    """Stop the Prefect servers this process started (SIGTERM, SIGKILL after ``grace_s``) and reap them."""
    for process in _servers:
        if process.poll() is None:
            process.terminate()
    for process in _servers:
        try:
            process.wait(grace_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# -- which API a failure could not reach ---------------------------------------------------------------


def unreachable_prefect_api(exc: BaseException) -> str | None:
    """The Prefect API's URL when ``exc`` says it cannot be reached (Prefect's own "Failed to reach API
    at URL", or a refused connection to it), else None."""
    for e in causes(exc):
        found = re.search(r"Failed to reach API at (\S+?)\.?$", str(e).strip())
        if isinstance(e, RuntimeError) and found:
            return found.group(1)
    url = prefect_api_url()
    for e in causes(exc):
        if type(e).__name__ in {"ConnectError", "ConnectTimeout"} and type(e).__module__.startswith(
            "httpx"
        ):
            try:
                target = str(e.request.url)  # type: ignore[attr-defined]  # httpx errors carry the request; checked by the except
            except (AttributeError, RuntimeError):  # no request attached: not attributable
                continue
            if url and target.startswith(url.rstrip("/")):
                return url
    return None


def prefect_api_url() -> str | None:
    """The API this process talks to: ``PREFECT_API_URL``, else the temporary server it started."""
    if os.environ.get("PREFECT_API_URL"):
        return os.environ["PREFECT_API_URL"]
    if temporary_server_url():
        return temporary_server_url()
    server = sys.modules.get("prefect.server.api.server")
    for instance in getattr(
        getattr(server, "SubprocessASGIServer", None), "_instances", {}
    ).values():
        return str(instance.api_url)
    return None
