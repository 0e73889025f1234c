"""Generation across many workers, with Prefect's own machinery.

``generate_distributed_flow`` fans persona generation out as runs of the ``generate-persona``
deployment (one flow run per persona, all created at once with ``run_deployment``, linked to this run
as subflows), so any worker polling that deployment's work pool — process workers on several
machines, Docker containers, Kubernetes jobs — takes them. Each run writes its persona to a bundle at
an fsspec URL (a shared folder, ``s3://…``, ``gs://…``). When every persona run has finished, this run
reads the bundles and lands them all in one transaction through the landing protocol (one ``Landing``
with a ``PersonaLanding`` per persona): DuckDB keeps a single writer, on the machine that owns the
warehouse.

Content is the same as in-process generation (``generate_flow``): ids derive from content, each
persona is generated from the same config and seed, and the landing is the same upsert. A persona
run that does not complete fails this run before anything lands; finished personas are served from
Prefect's cache when the run is repeated, and unchanged personas are skipped when landing, so a
re-run after a lost worker ends in the same warehouse as an uninterrupted run.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from prefect import flow, get_run_logger

from clonemem.schemas.config import RunConfig, resolve_config
from clonemem.schemas.results import GenerationResult
from clonemem.tasks.generation import record_run_task
from clonemem.tasks.runs import flow_run_record
from clonemem.tasks.scaleout import bundle_url, failure_records, land_bundles_task

PERSONA_DEPLOYMENT = "generate-persona/generate-persona"


class PersonaRunsFailed(RuntimeError):
    """Some persona runs did not complete: nothing was landed."""


def default_bundle_location(warehouse_path: str) -> str:
    """Beside the warehouse: enough when the workers share this machine's file system."""
    return f"{warehouse_path}.bundles"


def launch_persona_runs(deployment: str, urls: Sequence[str], config: dict, run_id: str) -> list:
    """Create one flow run of ``deployment`` per persona (returns at once; workers pick them up)."""
    from prefect.deployments import run_deployment
    from prefect.exceptions import ObjectNotFound
    from prefect.settings import PREFECT_API_URL

    runs = []
    for index, url in enumerate(urls):
        try:
            runs.append(
                run_deployment(
                    deployment,
                    parameters={"persona_index": index, "bundle_path": url, "config": config},
                    timeout=0,
                    flow_run_name=f"{config['name']}-persona-{index}",
                    idempotency_key=f"{run_id}:persona-{index}",
                    tags=["clonemem", "scale-out"],
                )
            )
        except ObjectNotFound:
            raise PersonaRunsFailed(
                f"flow parameter `persona_deployment`: no deployment {deployment!r} on the Prefect server "
                f"({PREFECT_API_URL.value() or 'ephemeral: distribute needs a real server'}); deploy it with "
                "`prefect --no-prompt deploy --all` and start workers on its pool (README: Scaling out)"
            ) from None
    return runs


def wait_for_runs(runs: list, poll_seconds: float) -> list:
    """Poll the server until every run is in a final state; returns the runs as last read."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    logger = get_run_logger()
    ids = [r.id for r in runs]
    done_before = -1
    with get_client(sync_client=True) as client:
        while True:
            by_id = {
                r.id: r
                for r in client.read_flow_runs(
                    flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=ids)), limit=len(ids)
                )
            }
            current = [by_id.get(i, r) for i, r in zip(ids, runs)]
            done = sum(1 for r in current if r.state is not None and r.state.is_final())
            if done != done_before:
                logger.info("persona runs finished: %d/%d", done, len(ids))
                done_before = done
            if done == len(ids):
                return current
            time.sleep(poll_seconds)


@flow(name="generate-distributed")
def generate_distributed_flow(
    warehouse_path: str,
    config: RunConfig | str | None = None,
    bundle_location: str | None = None,
    persona_deployment: str = PERSONA_DEPLOYMENT,
    poll_seconds: float = 2.0,
) -> GenerationResult:
    """Generate the config's personas as runs of ``persona_deployment`` on its work pool's workers,
    each into a bundle under ``bundle_location`` (any fsspec URL the workers and this run can both
    reach; default: a folder beside the warehouse), then land them all at once in ``warehouse_path``."""
    cfg = resolve_config(config)
    started, begun = time.perf_counter(), flow_run_record("generate", cfg)
    run_id = begun.run_id
    location = bundle_location or default_bundle_location(warehouse_path)
    urls = [bundle_url(location, cfg.name, run_id, i) for i in range(cfg.generation.personas)]
    # the workers get the configuration itself (they need no copy of the file); never the warehouse
    runs = launch_persona_runs(
        persona_deployment, urls, cfg.model_dump(mode="json", exclude={"warehouse"}), run_id
    )
    finished = wait_for_runs(runs, poll_seconds)
    failed = [(i, r) for i, r in enumerate(finished) if not r.state.is_completed()]
    if failed:
        raise PersonaRunsFailed(
            f"{len(failed)} of {len(finished)} persona runs did not complete, nothing was landed: "
            + "; ".join(
                f"persona {i} (flow run {r.name} {r.id}): {r.state.name}"
                + (f" - {r.state.message}" if r.state.message else "")
                for i, r in failed
            )
            + ". Run again: finished personas come from the cache"
        )
    result = land_bundles_task(warehouse_path, urls, cfg, run_id)
    result = result.model_copy(update={"seconds": round(time.perf_counter() - started, 2)})
    if result.landed or result.llm_calls or result.failures:
        record_run_task(
            warehouse_path,
            begun.finished("completed", summary_json=result.model_dump_json()),
            failure_records(result),
        )
    return result
