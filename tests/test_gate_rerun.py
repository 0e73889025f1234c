"""A gate run after the list of expectations changed (a new check, a new release) works on a warehouse
gated before: GX's stored checkpoint named assets of the old numbering and failed to load."""

from __future__ import annotations

from pathlib import Path

from clonemem.demo import fixture_files
from clonemem.expectations import checks, gate
from clonemem.importers import import_files
from clonemem.warehouse import Warehouse


def test_a_gate_after_the_checks_changed_reads_no_stale_checkpoint(
    tmp_path: Path, monkeypatch
) -> None:
    wh = tmp_path / "wh.duckdb"
    with Warehouse.open_writer(wh) as writer:
        import_files(writer, "release", fixture_files()[:1], "demo")
    fewer = tuple(c for c in checks.CHECKS if c.suite != "format_integrity")
    monkeypatch.setattr(gate, "CHECKS", fewer)
    first = gate.run_gate(wh, "demo")
    monkeypatch.setattr(gate, "CHECKS", checks.CHECKS)
    second = gate.run_gate(wh, "demo")  # failed with "Could not find asset named 'q…'" before
    assert len(second.outcomes) > len(first.outcomes)
    assert {o.expectation for o in first.outcomes} < {o.expectation for o in second.outcomes}
