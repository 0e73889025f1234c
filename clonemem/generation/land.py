"""Landing generated content: the benchmark row, and each finished persona (or a persona bundle
generated elsewhere) in one transaction with the LLM calls it paid for, only when it changed."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from clonemem.generation.assemble import Assembly
from clonemem.llm.types import CallRecord
from clonemem.schemas.config import RunConfig
from clonemem.warehouse import Warehouse
from clonemem.warehouse.content import PersonaRows
from clonemem.warehouse.landing import Landing, PersonaLanding, land


class BenchmarkClash(ValueError):
    """The benchmark name is taken by an imported benchmark."""


def benchmark_row(config: RunConfig) -> dict:
    from clonemem.ids import benchmark_id

    return {
        "benchmark_id": benchmark_id(config.name), "name": config.name, "source": "generated",
        "is_offline": config.models.ref("generator").provider == "offline", "language": config.generation.language,
        "config_json": config.model_dump_json(exclude={"warehouse"}), "gate_status": "pending",
        "status": "incomplete",
    }


def ensure_benchmark(wh: Warehouse, config: RunConfig) -> bool:
    """Create or update the benchmark row; returns whether anything was written."""
    row = benchmark_row(config)
    got = wh.rows("SELECT source, is_offline, language, config_json::VARCHAR FROM benchmarks WHERE benchmark_id = ?",
                  [row["benchmark_id"]])
    if got and got[0][0] != "generated":
        raise BenchmarkClash(f"benchmark {config.name!r} exists and was {got[0][0]}; set another `name` in the config")
    if got and (got[0][1], got[0][2], json.loads(got[0][3])) == (row["is_offline"], row["language"],
                                                                 json.loads(row["config_json"])):
        return False
    wh.upsert("benchmarks", [row])
    return True


def land_persona(wh: Warehouse, assembly: Assembly, benchmark_id: str, calls: Sequence[CallRecord] = ()) -> bool:
    """Replace the persona's rows; skip (return False) when the landed content hash is the same."""
    return bool(land(wh, Landing(benchmark_id, "persona", [PersonaLanding(assembly.rows, assembly.content_hash)],
                                 calls=calls, checkpoint="generation.landed")))


def land_bundle_files(wh: Warehouse, paths: Sequence[str | Path]) -> list[tuple[str, bool]]:
    """Land persona bundles written by `generate --persona N --bundle FILE` on other machines."""
    out = []
    for path in paths:
        try:
            data = json.loads(Path(path).read_text("utf-8"))
            bench, tables, pid = data["benchmark"], data["tables"], data["persona_id"]
        except (OSError, ValueError, KeyError) as exc:
            raise ValueError(f"{path}: not a persona bundle ({exc})") from None
        if pid is None:
            out.append((str(path), False))
            continue
        existing = wh.rows("SELECT source FROM benchmarks WHERE benchmark_id = ?", [bench["benchmark_id"]])
        if existing and existing[0][0] != "generated":
            raise BenchmarkClash(f"{path}: benchmark {bench['name']!r} exists and was {existing[0][0]}")
        if not existing:
            wh.upsert("benchmarks", [bench])
        out.append((str(path), land_persona(wh, Assembly(PersonaRows(pid, tables)), bench["benchmark_id"])))
    return out
