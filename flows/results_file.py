"""Scoring a results file (a memory system run elsewhere) on a benchmark: stored and shown like a
built-in system's evaluation, under the name given, with the file's name and sha256 as its provenance."""

from __future__ import annotations

import datetime as dt
import time

from prefect import flow
from prefect.task_runners import ThreadPoolTaskRunner
from prefect.utilities.annotations import opaque

from clonemem import runtime
from clonemem.evaluation.land import EvaluationRun
from clonemem.evaluation.results_file import ResultsFileError, file_ks
from clonemem.memory import SYSTEMS
from clonemem.schemas.config import RunConfig, resolve_config
from clonemem.schemas.results_file import ResultsFileScored
from clonemem.tasks.context import flow_run_ids, new_run_id
from clonemem.tasks.evaluation import land_task, load_task
from clonemem.tasks.reporting import log, publish_leaderboard
from clonemem.tasks.results_file import file_answer_task, file_retrieve_task, read_results_task


@flow(name="evaluate-results-file", task_runner=ThreadPoolTaskRunner(max_workers=8))
def evaluate_results_file_flow(warehouse_path: str, benchmark: str, path: str, name: str, ks: list[int] | None = None,
                               force: bool = False, config: RunConfig | str | None = None,
                               allow_missing: bool = False) -> ResultsFileScored:
    """Score the retrievals (and choices, answers) in the JSONL file ``path`` as the system ``name``."""
    cfg = resolve_config(config)
    if name in SYSTEMS.names():
        raise ResultsFileError(f"--name {name!r} is a registered memory system: name the file's system otherwise")
    started = time.perf_counter()
    bid, bname, personas = load_task(warehouse_path, benchmark, force)
    resolved = read_results_task(warehouse_path, bid, path, allow_missing)
    ks = file_ks(resolved, ks)
    flow_run_id, _ = flow_run_ids()
    run = EvaluationRun(flow_run_id or new_run_id(), bid, bname, (name,), tuple(ks), force, cfg,
                        dt.datetime.now(dt.UTC).replace(tzinfo=None), flow_run_id,
                        provenance={name: dict(resolved.provenance)})
    with runtime.use(runtime.Runtime(cfg, run_id=run.eval_run_id, warehouse=warehouse_path)):
        lines = {p.persona_id: resolved.by_persona.get(p.persona_id, {}) for p in personas}
        reading = {p.persona_id: file_retrieve_task.submit(name, opaque(p), opaque(lines[p.persona_id]))
                   for p in personas}
        retrievals = {(name, pid): f.result() for pid, f in reading.items()}
        answering = {(name, k, p.persona_id): file_answer_task.submit(
            name, k, opaque(p), opaque(retrievals[(name, p.persona_id)].value), opaque(lines[p.persona_id]))
            for k in ks for p in personas}
        answers = {key: f.result() for key, f in answering.items()}
    calls = [c for paid in (*retrievals.values(), *answers.values()) for c in paid.calls]
    result = land_task(warehouse_path, run, opaque(personas), opaque({k: v.value for k, v in retrievals.items()}),
                       opaque({k: v.value for k, v in answers.items()}), opaque(calls))
    result = result.model_copy(update={"seconds": round(time.perf_counter() - started, 2)})
    log(f"results file {resolved.file} (sha256 {resolved.sha256}) scored as {name!r}: {resolved.lines} lines, "
        f"{len(resolved.missing)} questions missing")
    publish_leaderboard(result)
    return ResultsFileScored(evaluation=result, system=name, file=resolved.file, sha256=resolved.sha256,
                             lines=resolved.lines, missing=len(resolved.missing), ks=tuple(ks))
