"""The error a memory system's evaluation fails with: the command line maps it (and only it) to exit 5."""

from __future__ import annotations

from clonemem.errors import ExitCode, UserError


class MemorySystemFailed(RuntimeError, UserError):
    """A named memory system could not be built, fed or queried (its own code, a remote server, a file).

    ``system`` is the name the user gave; the message says what failed and where (URL, call, field, line)."""

    exit_code = ExitCode.SYSTEMS_FAILED

    def __init__(self, system: str, message: str) -> None:
        super().__init__(f"memory system {system!r}: {message}")
        self.system = system
        self.detail = message
