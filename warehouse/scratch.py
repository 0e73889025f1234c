"""Scratch folders in the system's temporary folder: readers' snapshot copies of a warehouse being
written (``clonemem-snapshot-<pid>-*``), the guarded connection's spill folders
(``clonemem-sqltmp-<pid>-*``) and a writer's empty warehouse that new files copy
(``clonemem-schema-<pid>-*``).

Each name carries the id of the process that owns it. The owner removes its folders when it closes
what uses them, and at exit; a process killed outright (``kill -9``) cannot, so every reader first
removes the folders whose owner is no longer running (:func:`sweep`).
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import tempfile
import threading
from pathlib import Path

SNAPSHOT = "clonemem-snapshot"
SPILL = "clonemem-sqltmp"
SCHEMA = "clonemem-schema"
_OWNED = re.compile(rf"^(?:{SNAPSHOT}|{SPILL}|{SCHEMA})-(?P<pid>\d+)-")

_mine: set[Path] = set()
_lock = threading.Lock()


def base() -> Path:
    """Where scratch folders go: the system's temporary folder (``$TMPDIR``)."""
    return Path(tempfile.gettempdir())


def make(kind: str) -> Path:
    """A fresh folder of ``kind`` owned by this process (removed at exit if not released before)."""
    path = Path(tempfile.mkdtemp(prefix=f"{kind}-{os.getpid()}-", dir=base()))
    with _lock:
        _mine.add(path)
    return path


def named(kind: str, key: str) -> Path:
    """This process's folder of ``kind`` for ``key`` (the same path each time; created empty, mode 0700)."""
    path = base() / f"{kind}-{os.getpid()}-{key}"
    path.mkdir(mode=0o700, exist_ok=True)
    with _lock:
        _mine.add(path)
    return path


def release(path: Path | None) -> None:
    """Remove one of this process's scratch folders."""
    if path is None:
        return
    with _lock:
        _mine.discard(path)
    shutil.rmtree(path, ignore_errors=True)


def sweep() -> list[Path]:
    """Remove scratch folders whose owning process has died; returns what was removed."""
    removed: list[Path] = []
    try:
        entries = list(os.scandir(base()))
    except OSError:
        return removed
    for entry in entries:
        m = _OWNED.match(entry.name)
        if m is None or not entry.is_dir(follow_symlinks=False):
            continue
        pid = int(m["pid"])
        if pid == os.getpid() or _alive(pid):
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        if not os.path.exists(entry.path):
            removed.append(Path(entry.path))
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive, and not ours to touch
        return True
    except OSError:
        return True
    return True


@atexit.register
def _remove_mine() -> None:
    with _lock:
        paths = list(_mine)
        _mine.clear()
    for path in paths:
        shutil.rmtree(path, ignore_errors=True)
