"""Which benchmarks a warehouse holds: look one up by id or name."""

from __future__ import annotations

from typing import TYPE_CHECKING

from clonemem.errors import UserError

if TYPE_CHECKING:
    from clonemem.warehouse.db import Warehouse


class UnknownBenchmark(LookupError, UserError):
    """No benchmark with that id or name; the message lists the known names."""


def resolve_benchmark(wh: Warehouse, ref: str) -> tuple[str, str]:
    """(id, name) of a benchmark given its id or its name."""
    got = wh.rows(
        "SELECT benchmark_id, name FROM benchmarks WHERE benchmark_id = ? OR name = ?", [ref, ref]
    )
    if not got:
        names = [r[0] for r in wh.rows("SELECT name FROM benchmarks ORDER BY name")]
        raise UnknownBenchmark(
            f"no benchmark {ref!r} in {wh.path} (known: {', '.join(names) or 'none'})"
        )
    return got[0]


class EvaluationRefused(RuntimeError, UserError):
    """The benchmark has not passed the gate (and evaluation was not forced)."""


def require_gate_passed(wh: Warehouse, ref: str, force: bool) -> tuple[str, str]:
    """(id, name) of a benchmark that may be evaluated: its gate passed, or ``force``."""
    bid, name = resolve_benchmark(wh, ref)
    status = gate_status(wh, bid)
    if status != "passed" and not force:
        raise EvaluationRefused(
            f"benchmark {name!r} has gate status {status!r}: run `clonemem gate {name}` first, or "
            "evaluate anyway with --force (deployment parameter `force: true`)"
        )
    return bid, name


def gate_status(wh: Warehouse, benchmark_id: str) -> str | None:
    return wh.scalar("SELECT gate_status FROM benchmarks WHERE benchmark_id = ?", [benchmark_id])
