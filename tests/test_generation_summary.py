"""One generation summary: scale-out's (personas read from bundles) is tallied by the same code as
in-process generation's (``GenerationTally``), so the two report the same counts for the same personas."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from clonemem.generation.bundle import PersonaBundle
from clonemem.generation.report import GenerationTally
from clonemem.llm.types import CallRecord
from clonemem.schemas.results import StageFailure
from tests.pipeline_kit import tiny_config

SUMMARY = ("landed", "unchanged", "traces", "evidence", "detailed_events", "failures", "dropped")


def _call(run_id: str) -> CallRecord:
    return CallRecord(
        call_id=f"c-{run_id}",
        run_id=run_id,
        stage="gen.persona",
        role="generator",
        provider="offline",
        model="world",
        is_offline=True,
        prompt_hash="h",
        started_at=dt.datetime(2024, 1, 1),
    )


def _bundle(
    key: str, persona_id: str | None, run_id: str, calls: tuple[CallRecord, ...], **tables: int
) -> PersonaBundle:
    failure = StageFailure(persona=key, stage="gen.phase", item="E1P1", error="kept failing")
    return PersonaBundle(
        url=f"memory://{key}",
        benchmark={"benchmark_id": "b"},
        persona_key=key,
        persona_id=persona_id,
        tables={t: [{}] * n for t, n in tables.items()},
        content_hash=None,
        failures=(failure,),
        dropped=("evidence 'x': carried by no written trace",) if persona_id else (),
        calls=calls,
        run_id=run_id,
    )


def test_bundles_are_tallied_landed_unchanged_or_failed() -> None:
    tally = GenerationTally("b", "n", personas=3, run_id="orchestrator")
    tally.add_bundle(
        _bundle(
            "p00",
            "id0",
            "w0",
            (_call("w0"), _call("earlier")),
            traces=3,
            evidence=2,
            detailed_events=1,
        ),
        landed=True,
    )
    tally.add_bundle(_bundle("p01", "id1", "w1", (_call("w1"),), traces=4), landed=False)
    tally.add_bundle(
        _bundle("p02", None, "w2", (_call("w2"),)), landed=False
    )  # stage I failed: no rows
    got = tally.result(1.234)
    assert (got.landed, got.unchanged, got.traces, got.evidence, got.detailed_events) == (
        1,
        1,
        7,
        2,
        1,
    )
    assert (
        got.llm_calls == 3
    )  # the calls each worker's run made; not those its cached results carried
    assert [f.persona for f in got.failures] == ["p00", "p01", "p02"]
    assert got.dropped == (
        "p00: evidence 'x': carried by no written trace",
        "p01: evidence 'x': carried by no written trace",
    )
    assert (got.seconds, got.run_id, got.benchmark_id, got.personas) == (
        1.23,
        "orchestrator",
        "b",
        3,
    )


@pytest.mark.prefect
def test_scale_out_summary_equals_in_process_summary(tmp_path: Path) -> None:
    """The orchestrating run's landing task (without a Prefect server: its function) reports what
    in-process generation reports for the same config; landing again reports every persona unchanged."""
    from clonemem.flows.generation import generate_persona_flow, run_generation
    from clonemem.flows.scaleout import land_bundles_task
    from clonemem.schemas.config import load_config

    cfg = load_config(tiny_config(tmp_path, "summary", personas=2))
    urls = [f"memory://clonemem-test/{tmp_path.name}/summary/persona-{i}.json" for i in range(2)]
    for i, url in enumerate(urls):
        generate_persona_flow(i, url, cfg)
    in_process = run_generation(cfg, str(tmp_path / "in-process.duckdb"))
    scaled = land_bundles_task.fn(str(tmp_path / "bundles.duckdb"), urls, cfg, "orchestrator")
    assert in_process.landed == 2 and in_process.traces > 0
    assert {f: getattr(scaled, f) for f in SUMMARY} == {f: getattr(in_process, f) for f in SUMMARY}
    again = land_bundles_task.fn(str(tmp_path / "bundles.duckdb"), urls, cfg, "orchestrator-2")
    assert (again.landed, again.unchanged, again.traces) == (0, 2, in_process.traces)
