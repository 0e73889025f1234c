"""Persona bundles: one generated persona's rows, written where a worker can leave them for the
machine that owns the warehouse (`clonemem land`), which lands them through the landing protocol."""

from __future__ import annotations

import json
from dataclasses import asdict

from clonemem.generation.assemble import Assembly
from clonemem.generation.dag import PersonaDag
from clonemem.generation.land import benchmark_row
from clonemem.schemas.config import RunConfig
from clonemem.schemas.results import PersonaBundleResult


def write_bundle(path: str, config: RunConfig, dag: PersonaDag, assembly: Assembly | None) -> PersonaBundleResult:
    bundle = {"benchmark": benchmark_row(config), "failures": [asdict(f) for f in dag.failures],
              "tables": assembly.rows.tables if assembly else {},
              "persona_id": assembly.rows.persona_id if assembly else None,
              "calls": [c.row() for c in dag.calls]}
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(bundle, fh, ensure_ascii=False, default=str)
    return PersonaBundleResult(persona_id=bundle["persona_id"], bundle=path, failures=len(dag.failures))
