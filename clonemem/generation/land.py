"""Landing generated content: the benchmark row, and each finished persona (or a persona bundle
generated elsewhere) in one transaction with the LLM calls it paid for, only when it changed."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from clonemem.generation.assemble import Assembly
from clonemem.generation.benchmark import benchmark_row
from clonemem.generation.bundle import BundleError, PersonaBundle, read_bundle
from clonemem.llm.types import CallRecord
from clonemem.schemas.config import RunConfig
from clonemem.warehouse import Warehouse
from clonemem.warehouse.content import PersonaRows
from clonemem.warehouse.landing import Landing, PersonaLanding, land, rows_hash


class BenchmarkClash(ValueError):
    """The benchmark name is taken by an imported benchmark."""


def benchmark_needs_writing(wh: Warehouse, row: dict) -> bool:
    """Whether the benchmark row is missing or its configuration changed (an unchanged row is not
    rewritten, so its gate verdict stands); a name taken by an imported benchmark is refused."""
    got = wh.rows(
        "SELECT source, is_offline, language, config_json::VARCHAR FROM benchmarks WHERE benchmark_id = ?",
        [row["benchmark_id"]],
    )
    if got and got[0][0] != "generated":
        raise BenchmarkClash(
            f"benchmark {row['name']!r} exists and was {got[0][0]}; set another `name` in the config"
        )
    return not got or (got[0][1], got[0][2], json.loads(got[0][3])) != (
        row["is_offline"],
        row["language"],
        json.loads(row["config_json"]),
    )


def ensure_benchmark(wh: Warehouse, config: RunConfig) -> bool:
    """Create or update the benchmark row; returns whether anything was written."""
    row = benchmark_row(config)
    if not benchmark_needs_writing(wh, row):
        return False
    wh.upsert("benchmarks", [row])
    return True


def land_persona(
    wh: Warehouse, assembly: Assembly, benchmark_id: str, calls: Sequence[CallRecord] = ()
) -> bool:
    """Replace the persona's rows; skip (return False) when the landed content hash is the same."""
    return bool(
        land(
            wh,
            Landing(
                benchmark_id,
                "persona",
                [PersonaLanding(assembly.rows, assembly.content_hash)],
                calls=calls,
                checkpoint="generation.landed",
            ),
        )
    )


def land_bundles(wh: Warehouse, bundles: Sequence[PersonaBundle]) -> list[str]:
    """Land persona bundles of one benchmark in one transaction (one :class:`Landing` with a
    :class:`PersonaLanding` per persona, and the calls they paid for); returns the persona ids whose
    content was written (unchanged personas are skipped, calls already in the ledger not repeated)."""
    if not bundles:
        return []
    bids = {b.benchmark_id for b in bundles}
    if len(bids) > 1:
        raise ValueError(
            f"bundles of {len(bids)} benchmarks cannot land in one transaction: {sorted(bids)}"
        )
    row = dict(bundles[0].benchmark)
    try:
        needed = benchmark_needs_writing(wh, row)
    except BenchmarkClash as exc:
        raise BenchmarkClash(f"{bundles[0].url}: {exc}") from None
    personas = [
        PersonaLanding(PersonaRows(b.persona_id, b.tables), rows_hash(b.tables))
        for b in bundles
        if b.persona_id is not None
    ]
    calls = [c for b in bundles for c in b.calls]
    return land(
        wh,
        Landing(
            row["benchmark_id"],
            "persona",
            personas,
            benchmark=row if needed else None,
            calls=calls,
            call_runs="completed",
            checkpoint="generation.landed",
        ),
    )


def land_bundle_files(wh: Warehouse, paths: Sequence[str | Path]) -> list[tuple[str, bool]]:
    """Land persona bundles (local paths or fsspec URLs) written by `generate --persona N --bundle FILE` or
    the `generate-persona` deployment on other machines: each benchmark's bundles in one transaction."""
    try:
        bundles = [read_bundle(str(p)) for p in paths]
    except BundleError as exc:
        raise ValueError(str(exc)) from None
    landed: set[str] = set()
    for bid in dict.fromkeys(b.benchmark_id for b in bundles):
        landed.update(land_bundles(wh, [b for b in bundles if b.benchmark_id == bid]))
    return [(b.url, b.persona_id is not None and b.persona_id in landed) for b in bundles]
