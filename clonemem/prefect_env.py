"""Prefect settings for local runs on a small machine with no network.

Must run before ``import prefect``: Prefect reads its settings at import time. Every value is a
default, so anything the user exports wins.
"""

from __future__ import annotations

import os

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

_pipe_write_end: int | None = None
_servers: list = []  # the server processes started here (subprocess.Popen)


def die_with_parent_server() -> None:
    """Make the ephemeral Prefect server a child that dies with this process (even on SIGKILL).

    Call before the first flow runs; a no-op when a real server is configured (``PREFECT_API_URL``).
    """
    global _pipe_write_end
    if _pipe_write_end is not None or os.environ.get("PREFECT_API_URL"):
        return
    import subprocess

    from prefect.server.api import server as server_module

    original = server_module.SubprocessASGIServer._run_uvicorn_command
    read_end, _pipe_write_end = os.pipe()  # both non-inheritable; the read end is passed explicitly

    def run_uvicorn_under_watchdog(self) -> subprocess.Popen:
        real_popen = subprocess.Popen

        def popen(*a, **kwargs):
            args = kwargs.pop("args", None) if not a else a[0]
            if list(args[1:3]) != ["-m", "uvicorn"]:
                return real_popen(args, *a[1:], **kwargs)
            process = real_popen([args[0], "-c", _WATCHDOG, str(read_end), *args[3:]], pass_fds=(read_end,),
                                 start_new_session=True, **kwargs)
            _servers.append(process)
            return process

        server_module.subprocess.Popen = popen
        try:
            return original(self)
        finally:
            server_module.subprocess.Popen = real_popen

    server_module.SubprocessASGIServer._run_uvicorn_command = run_uvicorn_under_watchdog


def stop_servers(grace_s: float = 1.5) -> None:
    """Stop the Prefect servers this process started (SIGTERM, SIGKILL after ``grace_s``) and reap them."""
    import subprocess

    for process in _servers:
        if process.poll() is None:
            process.terminate()
    for process in _servers:
        try:
            process.wait(grace_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
