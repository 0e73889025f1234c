"""Landing: one persona's rows into the warehouse in one transaction, only when they changed."""

from __future__ import annotations

import json

from clonemem.generation.assemble import Assembly
from clonemem.schemas.config import RunConfig
from clonemem.warehouse import Warehouse
from clonemem.faults import checkpoint
from clonemem.warehouse.content import PERSONA_TABLES, delete_persona
from clonemem.warehouse.lifecycle import MARK_INCOMPLETE


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
        raise ValueError(f"benchmark {config.name!r} exists and was {got[0][0]}; set another `name` in the config")
    if got and (got[0][1], got[0][2], json.loads(got[0][3])) == (row["is_offline"], row["language"],
                                                                 json.loads(row["config_json"])):
        return False
    wh.upsert("benchmarks", [row])
    return True


def land(wh: Warehouse, assembly: Assembly, benchmark_id: str) -> bool:
    """Replace the persona's rows; skip (return False) when the landed content hash is the same."""
    pid = assembly.rows.persona_id
    digest = assembly.content_hash
    if wh.scalar("SELECT content_hash FROM persona_landings WHERE persona_id = ?", [pid]) == digest:
        return False
    with wh.transaction():
        delete_persona(wh, pid)
        for table in PERSONA_TABLES:
            if table in assembly.rows.tables:
                wh.upsert(table, assembly.rows.tables[table])
        wh.upsert("persona_landings", [{"persona_id": pid, "benchmark_id": benchmark_id, "content_hash": digest}])
        # new content invalidates an earlier gate verdict, and the benchmark is incomplete until gated again
        wh.execute(MARK_INCOMPLETE, [benchmark_id])
    checkpoint("generation.landed")
    return True


def land_bundle_files(wh: Warehouse, paths: list) -> list[tuple[str, bool]]:
    """Land persona bundles written by `generate --persona N --bundle FILE` on other machines."""
    from pathlib import Path

    from clonemem.generation.assemble import Assembly
    from clonemem.warehouse.content import PersonaRows

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
            raise ValueError(f"{path}: benchmark {bench['name']!r} exists and was {existing[0][0]}")
        if not existing:
            wh.upsert("benchmarks", [bench])
        out.append((str(path), land(wh, Assembly(PersonaRows(pid, tables)), bench["benchmark_id"])))
    return out
