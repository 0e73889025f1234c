"""Scale-out's work on the orchestrating side (see :mod:`clonemem.flows.scaleout`): where each persona
run writes its bundle, and landing every bundle at once."""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import NO_CACHE

from clonemem import ids
from clonemem.generation.bundle import join, read_bundle
from clonemem.generation.land import land_bundles
from clonemem.generation.report import GenerationTally
from clonemem.schemas.config import RunConfig
from clonemem.schemas.results import GenerationResult
from clonemem.warehouse import Warehouse
from clonemem.warehouse.runs import FailureRecord


def bundle_url(location: str, benchmark_name: str, run_id: str, persona_index: int) -> str:
    """Where persona ``persona_index`` of a distributed run goes: one folder per orchestrating run, so a
    persona run left over from an interrupted attempt never writes over this attempt's bundle."""
    return join(location, benchmark_name, run_id, f"persona-{persona_index:04d}.json")


@task(cache_policy=NO_CACHE, task_run_name="land bundles {run_id}")
def land_bundles_task(
    warehouse_path: str, urls: list[str], cfg: RunConfig, run_id: str
) -> GenerationResult:
    """Read every bundle (all must be readable) and land them in one transaction."""
    bundles = [read_bundle(u) for u in urls]
    with Warehouse.open_writer(warehouse_path) as wh:
        landed = set(land_bundles(wh, bundles))
    tally = GenerationTally(ids.benchmark_id(cfg.name), cfg.name, cfg.generation.personas, run_id)
    for bundle in bundles:  # the same summary as in-process generation's
        tally.add_bundle(bundle, bundle.persona_id in landed)
    return tally.result(0.0)


def failure_records(result: GenerationResult) -> list[FailureRecord]:
    """The steps that kept failing in the landed personas, as the run's failure rows."""
    return [FailureRecord(f.persona, f.stage, f.item, f.error) for f in result.failures]
