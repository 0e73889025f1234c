"""The whole pipeline as one flow: generate → QA → gate → evaluate → export, the existing flows as
subflows. `clonemem run`, `clonemem generate`, `clonemem demo`, the `pipeline` deployment, the
benchmark scripts and the tests all run this chain; it is written here once.

A failed gate fails the run (the message lists the unmet expectations) and stops before evaluation,
unless ``force``. Generation that produced no persona fails the run before QA.
"""

from __future__ import annotations

import time

from prefect import flow

from clonemem import runtime
from clonemem.flows.evaluation import evaluate_flow
from clonemem.flows.gate import gate_flow
from clonemem.flows.generation import generate_flow
from clonemem.flows.qa import qa_flow
from clonemem.flows.scaleout import generate_distributed_flow
from clonemem.schemas.config import RunConfig
from clonemem.schemas.results import GateFailed, GenerationResult, PipelineResult
from clonemem.tasks.context import flow_run_ids
from clonemem.tasks.gate import gate_status_task
from clonemem.tasks.generation import record_run_task
from clonemem.tasks.release import DEFAULT_EXPORT, export_folder, export_task
from clonemem.tasks.reporting import publish_pipeline
from clonemem.tasks.runs import RunRecord, flow_run_record, open_run_task, run_config, tracked


class NothingGenerated(RuntimeError):
    """Every persona failed in stage I: there is nothing to ask questions about."""

    def __init__(self, message: str, generation: GenerationResult | None = None) -> None:
        super().__init__(message)
        self.generation = generation

    def __reduce__(self) -> tuple:
        return (NothingGenerated, (str(self), self.generation))


@flow(name="pipeline")
def pipeline_flow(
    warehouse_path: str,
    config: RunConfig | str | None = None,
    gate: bool = True,
    evaluate: bool = True,
    systems: list[str] | None = None,
    ks: list[int] | None = None,
    force: bool = False,
    export_dir: str | None = DEFAULT_EXPORT,
    distribute: bool = False,
    bundle_location: str | None = None,
) -> PipelineResult:
    """Generate the config's benchmark, write its questions, gate it, evaluate ``systems`` (default: the
    config's) at ``ks`` and export it to ``export_dir`` (``{warehouse}`` and ``{name}`` filled in: by default
    ``<warehouse>.release/<benchmark name>/``; None exports nothing). ``gate=False`` stops after the
    questions (a dry run counting calls needs no verdict), ``evaluate=False`` after the gate. ``distribute``
    generates each persona as a run of the `generate-persona` deployment on the workers, with bundles under
    ``bundle_location`` (any fsspec URL; see flows/scaleout.py), instead of in this process."""
    cfg = run_config(warehouse_path, "pipeline", config)
    run = flow_run_record("pipeline", cfg)
    # A deployment's run (a nightly one) has its row from the start, so a run whose worker dies is seen (as
    # crashed); a run in the command's own process writes only when something changed, so a cached re-run of
    # `clonemem generate` leaves the warehouse byte-for-byte as it was.
    opened = open_run_task(warehouse_path, run) if run.deployment_id else None
    # a failed pipeline run is recorded with its error (its stages' runs have their own rows)
    with (
        tracked(warehouse_path, opened or run),
        runtime.spending(cfg.max_cost_usd),
    ):  # one budget for the chain
        return _chain(
            warehouse_path,
            cfg,
            opened or run,
            opened is not None,
            gate,
            evaluate,
            systems,
            ks,
            force,
            export_dir,
            distribute,
            bundle_location,
        )


def _chain(
    warehouse_path: str,
    cfg: RunConfig,
    begun: RunRecord,
    opened: bool,
    gate: bool,
    evaluate: bool,
    systems: list[str] | None,
    ks: list[int] | None,
    force: bool,
    export_dir: str | None,
    distribute: bool,
    bundle_location: str | None,
) -> PipelineResult:
    started = time.perf_counter()
    flow_run_id, _ = flow_run_ids()
    gen = (
        generate_distributed_flow(warehouse_path, cfg, bundle_location)
        if distribute
        else generate_flow(warehouse_path, cfg)
    )
    if gen.generated == 0:
        raise NothingGenerated(
            f"no persona was generated ({len(gen.failures)} stage item(s) failed): fix the "
            "provider settings or the config (flow parameter `config`) and run again; finished "
            "work is cached",
            gen,
        )
    qa = qa_flow(warehouse_path, cfg)
    if not gate:
        return PipelineResult(
            benchmark_id=gen.benchmark_id,
            name=cfg.name,
            generation=gen,
            qa=qa,
            gate_status="pending",
            seconds=round(time.perf_counter() - started, 2),
        )
    status = gate_status_task(warehouse_path, gen.benchmark_id)
    failed: tuple[str, ...] = ()
    if gen.landed or qa.landed or status != "passed":
        try:
            status = gate_flow(warehouse_path, gen.benchmark_id).status
        except GateFailed as exc:
            status, failed = "failed", tuple(exc.result.describe_failures())
            if not force:
                raise GateFailed(
                    exc.result,
                    PipelineResult(
                        benchmark_id=gen.benchmark_id,
                        name=cfg.name,
                        generation=gen,
                        qa=qa,
                        gate_status=status,
                        gate_failed=failed,
                        seconds=round(time.perf_counter() - started, 2),
                    ),
                ) from None
    # else: nothing changed since it passed; re-running leaves the warehouse exactly as it was
    evaluation = (
        evaluate_flow(warehouse_path, gen.benchmark_id, systems, ks, force=force, config=cfg)
        if evaluate
        else None
    )
    exported = (
        export_task(
            warehouse_path, gen.benchmark_id, export_folder(export_dir, warehouse_path, cfg.name)
        )
        if export_dir
        else None
    )
    result = PipelineResult(
        benchmark_id=gen.benchmark_id,
        name=cfg.name,
        generation=gen,
        qa=qa,
        gate_status=status,
        gate_failed=failed,
        evaluation=evaluation,
        export=exported,
        seconds=round(time.perf_counter() - started, 2),
    )
    if flow_run_id and (opened or gen.landed or qa.landed or evaluation is not None):
        # the config's benchmark is the one generated (its id comes from the config's name)
        record_run_task(
            warehouse_path,
            begun.finished(
                "completed",
                summary_json=result.model_dump_json(
                    include={"benchmark_id", "name", "gate_status", "seconds"}
                ),
            ),
        )
    publish_pipeline(result, flow_run_id)
    return result
