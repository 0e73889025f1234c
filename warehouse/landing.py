"""The one landing protocol: content arrives as persona rows and lands atomically.

Every source goes through :func:`land`: generation (a finished persona, or a bundle generated
elsewhere), stage IV (a persona's questions and their quality-control records) and imports (all
personas of the files at once). One transaction writes the benchmark row, replaces each persona's
rows in the given scope, records the content hash (so an unchanged persona is skipped and the file
stays byte-for-byte the same), writes the LLM calls the content paid for (with a row in ``runs`` for each run that made them), and marks the benchmark
incomplete until its gate runs again (a reader never sees new content under an old verdict).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from clonemem.faults import checkpoint
from clonemem.ids import stable_hash
from clonemem.warehouse.content import (
    PERSONA_TABLES,
    QA_TABLES,
    PersonaRows,
    delete_persona,
    delete_persona_qa,
)
from clonemem.warehouse.lifecycle import MARK_INCOMPLETE
from clonemem.warehouse.runs import RunStatus, adopt_runs

if TYPE_CHECKING:
    from clonemem.llm.types import CallRecord
    from clonemem.warehouse.db import Warehouse

Scope = Literal["persona", "qa"]

# scope -> (tables it replaces, how to remove a persona's rows in it, the table of landed hashes)
_SCOPES = {
    "persona": (PERSONA_TABLES + ("import_notes",), delete_persona, "persona_landings"),
    "qa": (QA_TABLES, delete_persona_qa, "qa_landings"),
}


def rows_hash(tables: Mapping[str, Sequence[Mapping[str, Any]]]) -> str:
    """Content hash of a persona's rows (what decides whether a re-landing changes anything)."""
    return stable_hash(json.dumps(tables, sort_keys=True, default=str), 32)


@dataclass(frozen=True)
class PersonaLanding:
    rows: PersonaRows
    digest: str | None = (
        None  # recorded and compared when given: an equal landed hash skips the persona
    )
    summary: Mapping[str, Any] | None = (
        None  # kept beside the hash (stage IV's per-persona tallies)
    )


@dataclass(frozen=True)
class Landing:
    """One atomic write of content."""

    benchmark_id: str
    scope: Scope
    personas: Sequence[PersonaLanding]
    benchmark: Mapping[str, Any] | None = (
        None  # the benchmark row, created or updated with the content
    )
    drop_personas: Sequence[str] = ()  # persona ids removed first (an import replacing a benchmark)
    calls: Sequence[CallRecord] = field(
        default_factory=tuple
    )  # the LLM calls this content paid for
    completes: bool = (
        False  # the content is the benchmark's last stage (an import): `complete` on commit
    )
    # what is known of a run that made some of the calls and has no row: a killed run whose results
    # come from the cache (`interrupted`), a worker's persona run behind a bundle (`completed`)
    call_runs: RunStatus = "interrupted"
    checkpoint: str | None = None  # fault hook passed after the transaction (kill/resume tests)
    # the personas are known to be new (a streamed import's batch): nothing to delete first, and their rows
    # are inserted table by table for the whole batch at once
    fresh: bool = False


def unchanged(wh: Warehouse, scope: Scope, persona_id: str, digest: str | None) -> bool:
    table = _SCOPES[scope][2]
    return (
        digest is not None
        and wh.scalar(f"SELECT content_hash FROM {table} WHERE persona_id = ?", [persona_id])
        == digest
    )


def new_calls(wh: Warehouse, calls: Sequence[CallRecord]) -> list[CallRecord]:
    """This warehouse's calls not yet in its ledger. A result served from Prefect's cache carries the
    calls of the run that made it: they land here only if that run was for this warehouse (a killed run,
    resumed), not when another warehouse's run filled the cache (that warehouse paid for them)."""
    calls = [
        c
        for c in calls
        if c.warehouse is None or Path(c.warehouse).expanduser().resolve() == wh.path
    ]
    if not calls:
        return []
    known = {
        r[0]
        for r in wh.rows(
            "SELECT call_id FROM llm_calls WHERE call_id IN (SELECT unnest(?::VARCHAR[]))",
            [[c.call_id for c in calls]],
        )
    }
    return [c for c in calls if c.call_id not in known]


def _write_personas(wh: Warehouse, landing: Landing, todo: Sequence[PersonaLanding]) -> None:
    """Each persona's rows replace its earlier ones (with its landed hash); fresh personas are inserted."""
    tables, delete, hashes = _SCOPES[landing.scope]
    # texts stored once for many traces (content-addressed): one already there is kept as it is
    wh.insert_missing(
        "trace_texts", [r for p in todo for r in p.rows.tables.get("trace_texts", [])]
    )
    if landing.fresh:
        for table in tables:
            wh.insert(table, [r for p in todo for r in p.rows.tables.get(table, [])])
        return
    for p in todo:
        delete(wh, p.rows.persona_id)
        for table in tables:
            if table in p.rows.tables:
                wh.upsert(table, p.rows.tables[table])
        if p.digest is not None:
            record = {
                "persona_id": p.rows.persona_id,
                "benchmark_id": landing.benchmark_id,
                "content_hash": p.digest,
            }
            if p.summary is not None:
                record["summary"] = json.dumps(p.summary)
            wh.upsert(hashes, [record])


def land(wh: Warehouse, landing: Landing) -> list[str]:
    """Write ``landing`` in one transaction; returns the ids of the personas whose content was written
    (personas whose recorded hash equals theirs are skipped). Calls already in the ledger (a cached
    result's) are not written again, so a re-run that changes nothing writes nothing."""
    todo = [
        p for p in landing.personas if not unchanged(wh, landing.scope, p.rows.persona_id, p.digest)
    ]
    calls = new_calls(wh, landing.calls)
    if not todo and not calls and not landing.drop_personas and landing.benchmark is None:
        return []
    with wh.transaction():
        if landing.benchmark is not None:
            wh.upsert("benchmarks", [dict(landing.benchmark)])
        for pid in landing.drop_personas:
            delete_persona(wh, pid)
        _write_personas(wh, landing, todo)
        wh.upsert("llm_calls", [c.row() for c in calls])
        adopt_runs(
            wh,
            calls,
            "qa" if landing.scope == "qa" else "generate",
            landing.benchmark_id,
            landing.call_runs,
        )
        if landing.completes:
            wh.execute(
                "UPDATE benchmarks SET status = 'complete' WHERE benchmark_id = ?",
                [landing.benchmark_id],
            )
        elif todo or landing.drop_personas:
            wh.execute(MARK_INCOMPLETE, [landing.benchmark_id])
    if landing.checkpoint and todo:
        checkpoint(landing.checkpoint)
    return [p.rows.persona_id for p in todo]
