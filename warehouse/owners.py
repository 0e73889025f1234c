"""Which process runs a run, and whether it still does: what tells an orphaned `running` row (its process
was killed, or its machine stopped) from a run still under way.

A process is named by its host, its pid and a start token. On Linux the token is the boot id and the
process's start time in clock ticks since boot (``/proc/<pid>/stat``), so a pid reused by another
process, or a reboot, is seen as the end of the original; elsewhere it is None and only the pid is
checked. Only a process of this host can be checked: a row from another host is never judged here.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path

BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


@dataclass(frozen=True)
class Owner:
    host: str
    pid: int
    process_start: str | None


def _stat(pid: int) -> tuple[str, str] | None:
    """The process's state letter and start time in clock ticks since boot, or None without /proc."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name (field 2) may hold spaces and parentheses: the fields after it follow the last ')'
    fields = stat[stat.rindex(")") + 2 :].split()
    return fields[0], fields[19]  # fields 3 (state) and 22 (starttime) of the line


def _token(pid: int) -> str | None:
    try:
        boot = BOOT_ID.read_text().strip()
    except OSError:
        return None
    stat = _stat(pid)
    return None if stat is None else f"{boot}:{stat[1]}"


def this_process() -> Owner:
    pid = os.getpid()
    return Owner(socket.gethostname(), pid, _token(pid))


def is_gone(host: str | None, pid: int | None, process_start: str | None) -> bool:
    """True only when the process is known to have ended: it ran on this host and its pid is no longer
    alive, or now belongs to another process (another start token). Unknown (no owner recorded, another
    host): False."""
    if host is None or pid is None or host != socket.gethostname():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        pass
    stat = _stat(pid)
    if stat is not None and stat[0] in ("Z", "X"):  # ended; its parent has not yet collected it
        return True
    if process_start is None:
        return False
    now = _token(pid)
    return now is not None and now != process_start


def gone_message(host: str, pid: int) -> str:
    return (
        f"crashed: its process (pid {pid} on {host}) ended without recording how the run ended (killed, "
        "or its machine stopped)"
    )
