"""Generation flows (stages I–III). The flow only orchestrates: stage tasks run on a thread pool,
the persona graphs decide what is ready, finished personas are assembled and landed at once.

All personas of a run are driven by one loop inside one flow run, so independent personas never
wait for each other (Prefect's concurrent subflows in threads were measured several times slower
on 2 cores). ``generate_persona_flow`` generates a single persona into a bundle file for scale-out.
"""

from __future__ import annotations

import datetime as dt
import json
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

from prefect import flow, task
from prefect.cache_policies import NO_CACHE
from prefect.context import get_run_context
from prefect.task_runners import ThreadPoolTaskRunner

from clonemem import runtime
from clonemem.generation.assemble import Assembly, assemble
from clonemem.generation.dag import PersonaDag
from clonemem.generation.execute import drive, new_dags
from clonemem.generation.land import benchmark_row, ensure_benchmark, land
from clonemem.ids import benchmark_id
from clonemem.schemas.config import RunConfig
from clonemem.tasks.generation import stage_task
from clonemem.warehouse import Warehouse
from clonemem.warehouse.sinks import BufferedWarehouseSink

WORKERS = 64


@dataclass
class GenerationSummary:
    benchmark_id: str
    name: str
    personas: int
    landed: int
    unchanged: int
    traces: int
    evidence: int
    detailed_events: int
    llm_calls: int
    failures: list[dict] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False)


@task(cache_policy=NO_CACHE, task_run_name="land {assembly.rows.persona_id}")
def land_persona(wh: Warehouse, assembly: Assembly, bid: str) -> bool:
    """Write one persona in one transaction (through this process's writer)."""
    return land(wh, assembly, bid)


def _start(stage, inp, item):  # noqa: ANN001 - executor hook for drive()
    return stage_task(stage).submit(stage.name, item, inp)


@flow(name="generate-benchmark", task_runner=ThreadPoolTaskRunner(max_workers=WORKERS))
def generate_flow(config: dict, warehouse_path: str) -> dict:
    """Generate every persona of the config concurrently and land each as soon as it is complete."""
    cfg = RunConfig.model_validate(config)
    started = time.perf_counter()
    started_at = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    run_id = str(get_run_context().flow_run.id) if get_run_context() else str(uuid.uuid4())
    bid = benchmark_id(cfg.name)
    wh = Warehouse.open_writer(warehouse_path)
    sink = BufferedWarehouseSink(wh)
    summary = GenerationSummary(bid, cfg.name, cfg.generation.personas, 0, 0, 0, 0, 0, 0)
    try:
        changed = ensure_benchmark(wh, cfg)
        rt = runtime.Runtime(cfg, sink=sink, run_id=run_id)

        def on_persona_done(dag: PersonaDag) -> None:
            summary.failures += [{"persona": dag.key, **asdict(f)} for f in dag.failures]
            assembly = assemble(dag, cfg.name)
            if assembly is None:
                return
            summary.dropped += [f"{dag.key}: {d}" for d in assembly.dropped]
            t = assembly.rows.tables
            summary.traces += len(t.get("traces", []))
            summary.evidence += len(t.get("evidence", []))
            summary.detailed_events += len(t.get("detailed_events", []))
            if land_persona(wh, assembly, bid):
                summary.landed += 1
            else:
                summary.unchanged += 1

        with runtime.use(rt):
            drive(new_dags(cfg), _start, on_persona_done)
        sink.flush()
        summary.llm_calls = sink.count
        summary.seconds = time.perf_counter() - started
        if changed or summary.landed or summary.llm_calls or summary.failures:
            # a run that changed nothing writes nothing, so the warehouse stays byte-for-byte the same
            _record_run(wh, run_id, bid, cfg, started_at, summary)
    finally:
        wh.close()
    return asdict(summary)


def run_generation(cfg: RunConfig, warehouse: Path) -> dict:
    """Run :func:`generate_flow` with the config's worker count."""
    runner = ThreadPoolTaskRunner(max_workers=cfg.generation.workers)
    return generate_flow.with_options(task_runner=runner)(cfg.model_dump(mode="json"), str(warehouse))


def _record_run(wh: Warehouse, run_id: str, bid: str, cfg: RunConfig, started_at: dt.datetime,
                summary: GenerationSummary) -> None:
    wh.upsert("runs", [{
        "run_id": run_id, "kind": "generate", "benchmark_id": bid, "flow_run_id": run_id,
        "status": "completed", "started_at": started_at, "finished_at": dt.datetime.now(dt.UTC).replace(tzinfo=None),
        "config_json": cfg.model_dump_json(exclude={"warehouse"}), "summary_json": summary.to_json(),
    }])
    wh.upsert("generation_failures", [
        {"run_id": run_id, "benchmark_id": bid, "persona_key": f["persona"], "stage": f["stage"], "item": f["item"],
         "error": f["error"]} for f in summary.failures])


@flow(name="generate-persona", task_runner=ThreadPoolTaskRunner(max_workers=WORKERS))
def generate_persona_flow(config: dict, persona_index: int, bundle_path: str) -> dict:
    """Scale-out unit: generate one persona and write its rows to a bundle file for `clonemem land`."""
    cfg = RunConfig.model_validate(config)
    dags = [d for d in new_dags(cfg) if d.spec.index == persona_index]
    if not dags:
        raise ValueError(f"persona index {persona_index} is outside 0..{cfg.generation.personas - 1}")
    done: list[PersonaDag] = []
    with runtime.use(runtime.Runtime(cfg)):
        drive(dags, _start, done.append)
    assembly = assemble(done[0], cfg.name)
    bundle = {"benchmark": benchmark_row(cfg), "failures": [asdict(f) for f in done[0].failures],
              "tables": assembly.rows.tables if assembly else {}, "persona_id": assembly.rows.persona_id if assembly else None}
    Path(bundle_path).write_text(json.dumps(bundle, ensure_ascii=False, default=str), "utf-8")
    return {"persona_id": bundle["persona_id"], "failures": len(bundle["failures"])}
