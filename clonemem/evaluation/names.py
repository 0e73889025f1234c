"""A results file's system name on a benchmark stands for one content: the file's sha256. Storing another
file's results (or a file's under a name a built-in run or a remote service used) would make the
leaderboard show them as a second evaluation of the same system, so it needs the user's word
(``--replace``) or a new name. (A remote service's label is not checked here: the same service may move
to another port, and its identity is its provenance, URL and ``/v1/info``.)"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from clonemem.errors import ExitCode, UserError

if TYPE_CHECKING:
    from clonemem.warehouse import Warehouse

# the provenance fields that say what a name stands for (SystemProvenance.extra)
IDENTITY = ("sha256",)
# what a message says a name stands for (url: a remote system since protocol 1.2; remote_url before)
SHOWN = ("file", "sha256", "url", "remote_url")


class NameTaken(ValueError, UserError):
    """The name already stands for other results on the benchmark (see :func:`name_reuse`)."""

    exit_code = ExitCode.USAGE


@dataclass(frozen=True)
class StoredUse:
    """The latest evaluation that stored results under a name: its id, when, and what the name stood for."""

    eval_run_id: str
    started_at: str
    extra: Mapping[str, str]

    def describe(self) -> str:
        what = (
            ", ".join(f"{k} {_short(v)}" for k, v in self.extra.items() if k in SHOWN)
            or "results of no file"
        )
        return f"{what} (evaluation {self.eval_run_id} of {self.started_at[:19]})"


def latest_use(wh: Warehouse, benchmark_id: str, system: str) -> StoredUse | None:
    """The benchmark's latest evaluation that scored ``system``, with the system's recorded provenance."""
    for eid, started, prov in wh.rows(
        "SELECT eval_run_id, started_at::VARCHAR, provenance_json FROM eval_runs "
        "WHERE benchmark_id = ? AND provenance_json IS NOT NULL "
        "ORDER BY started_at DESC, eval_run_id DESC",
        [benchmark_id],
    ):
        for entry in json.loads(prov).get("systems", []):
            if entry.get("system") == system:
                return StoredUse(
                    eid, started, {str(k): str(v) for k, v in (entry.get("extra") or {}).items()}
                )
    return None


def name_reuse(
    wh: Warehouse, benchmark_id: str, system: str, extra: Mapping[str, str]
) -> StoredUse | None:
    """The stored use of ``system`` on the benchmark when it stood for something else than ``extra`` says
    (another file's sha256, another URL, or a kind of system without that field); None when the name is
    new on the benchmark or stands for the same thing."""
    stored = latest_use(wh, benchmark_id, system)
    if stored is None:
        return None
    for key in IDENTITY:
        if key in extra and stored.extra.get(key) != extra[key]:
            return stored
    return None


def refuse_reuse(
    wh: Warehouse,
    benchmark_id: str,
    benchmark: str,
    system: str,
    extra: Mapping[str, str],
    flag: str,
    replace: bool,
) -> None:
    """Raise :class:`NameTaken` (one line: the name, what it stands for, and the two ways on) when storing
    ``extra``'s results under ``system`` would reuse the name for something else, unless ``replace``."""
    stored = None if replace else name_reuse(wh, benchmark_id, system, extra)
    if stored is not None:
        new = ", ".join(f"{k} {_short(v)}" for k, v in extra.items() if k in SHOWN)
        raise NameTaken(
            f"{flag} {system!r} already names other results on benchmark {benchmark!r}: "
            f"{stored.describe()}, not {new}; pass --replace to store these as its latest "
            f"evaluation (the earlier one stays in its history), or give a new {flag}"
        )


def _short(value: str) -> str:
    return (
        value[:12] + "…"
        if len(value) == 64 and all(c in "0123456789abcdef" for c in value)
        else value
    )
