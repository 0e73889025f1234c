"""The benchmark row of a generated benchmark: what its run configuration says about it (landed with
its first persona, and carried by every persona bundle generated elsewhere)."""

from __future__ import annotations

from clonemem.ids import benchmark_id
from clonemem.schemas.config import RunConfig


def benchmark_row(config: RunConfig) -> dict:
    """The `benchmarks` row of the configured benchmark, before its gate (pending) and completion."""
    return {
        "benchmark_id": benchmark_id(config.name),
        "name": config.name,
        "source": "generated",
        "is_offline": config.models.ref("generator").provider == "offline",
        "language": config.generation.language,
        "config_json": config.model_dump_json(exclude={"warehouse"}),
        "gate_status": "pending",
        "status": "incomplete",
    }
