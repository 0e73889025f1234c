"""Stored memory and write coverage: every built-in system lists what it holds at a time,
with provenance; write coverage is the share of traces that memory represents."""

from __future__ import annotations

import pytest

from clonemem.memory import SYSTEMS
from clonemem.memory.base import BuildContext, MemorySystem, QuestionView, Retrieved
from clonemem.memory.coverage import represented, write_coverage
from clonemem.runtime import Runtime, use
from clonemem.schemas.config import RunConfig
from clonemem.stages import STAGES
from tests.memory_kit import REMOTE, day, trace

BUILT_IN = (
    "oracle",
    "oracle_statements",
    "full_context",
    "random",
    "bm25",
    "dense",
    "hybrid",
    "flat_combined",
    "flat_wo_org",
    "mem0",
    "amem",
    "omem",
)
RAW = ("oracle", "oracle_statements", "full_context", "random", "bm25", "dense", "hybrid")


TRACES = [
    *REMOTE,
    trace("n1", "2023-05-11T08:00:00", "Rainy morning, grey sky over the harbour.", "social_media"),
]


@pytest.fixture(scope="module")
def rt() -> Runtime:
    return Runtime(RunConfig())


def build(name: str, rt: Runtime, traces=TRACES) -> MemorySystem:
    system = SYSTEMS.get(name)()
    model = rt.model("extractor")
    with use(rt):
        system.build(traces, BuildContext(llm=lambda stage, inp: STAGES.get(stage).run(model, inp)))
    return system


@pytest.fixture(scope="module")
def systems(rt) -> dict[str, MemorySystem]:
    return {name: build(name, rt) for name in BUILT_IN}


@pytest.mark.parametrize("name", BUILT_IN)
def test_stored_items_carry_provenance_and_respect_time(systems, name):
    system = systems[name]
    dates = {t.trace_id: t.event_date for t in TRACES}
    at_end = system.stored()
    assert at_end and all(isinstance(i, Retrieved) and i.text and i.trace_ids for i in at_end)
    assert all(set(i.trace_ids) <= set(dates) for i in at_end)
    for as_of in (day("2023-01-15"), day("2023-03-20"), day("2023-05-10T21:00:00")):
        items = system.stored(as_of)
        assert all(dates[t] <= as_of for i in items for t in i.trace_ids), (name, as_of, items)
        # what a question at that time retrieves was stored then
        got = system.retrieve(QuestionView("q", "remote work and my cat", as_of), 10)
        assert {t for i in got for t in i.trace_ids} <= represented(
            system, as_of
        ) or name == "oracle_statements"
    assert system.stored(day("2023-01-01")) == []
    assert (
        system.stored() == system.stored()
    )  # deterministic, and cheap enough to call per question


@pytest.mark.parametrize("name", RAW)
def test_raw_retrievers_store_every_trace(systems, name):
    system = systems[name]
    assert write_coverage(system, TRACES) == 1.0
    assert represented(system, day("2023-02-10T09:00:00")) == {"r1", "c1", "r2"}


def test_flat_extraction_ablations_store_their_units(systems):
    combined, extracted = systems["flat_combined"].stored(), systems["flat_wo_org"].stored()
    assert {i.kind for i in combined} >= {"trace", "summary"} and "trace" not in {
        i.kind for i in extracted
    }
    assert len(combined) == len(extracted) + len(TRACES)


def test_mem0_coverage_follows_its_operations(systems):
    """r1 ADD, c1 ADD, r2 NONE (a repeat adds no provenance), r3 UPDATE (keeps r1, adds r3), r4 DELETE
    (the contradicted memory and its sources leave), n1 states nothing about the writer."""
    mem0 = systems["mem0"]
    assert represented(mem0, day("2023-02-20")) == {"r1", "c1"}
    assert represented(mem0, day("2023-04-01")) == {"r1", "c1", "r3"}
    assert represented(mem0) == {"c1"}
    assert write_coverage(mem0, TRACES) == pytest.approx(1 / 6)
    early = [t for t in TRACES if t.event_date <= day("2023-04-01")]
    assert write_coverage(mem0, early, day("2023-04-01")) == pytest.approx(3 / 4)
    assert [i.kind for i in mem0.stored()] == ["fact"]


def test_note_and_profile_systems_keep_every_interaction(systems):
    assert write_coverage(systems["amem"], TRACES) == 1.0  # a note per trace
    assert write_coverage(systems["omem"], TRACES) == 1.0  # the interactions stay in its indexes
    kinds = {i.kind for i in systems["omem"].stored()}
    assert {"fact", "attribute", "trace"} <= kinds


def test_write_coverage_inputs():
    class NoListing(MemorySystem):
        name = "no_listing"

        def build(self, traces, ctx):
            pass

        def retrieve(self, question, k):
            return []

    with pytest.raises(NotImplementedError):
        write_coverage(NoListing(), TRACES)
    with pytest.raises(ValueError):
        write_coverage(NoListing(), [])


def test_write_coverage_takes_ids(systems):
    assert write_coverage(systems["mem0"], ["c1", "r1"]) == 0.5
