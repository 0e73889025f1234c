"""Scoring a results file (a memory system run elsewhere) on a benchmark: stored and shown like a
built-in system's evaluation, under the name given, with the file's name and sha256 as its provenance."""

from __future__ import annotations

import time
from typing import Any

from prefect import flow
from prefect.task_runners import TaskRunner, ThreadPoolTaskRunner

from clonemem import runtime
from clonemem.schemas.config import RunConfig, resolve_config
from clonemem.schemas.results_file import ResultsFileScored
from clonemem.tasks.context import as_is
from clonemem.tasks.evaluation import land_task, load_task, protocol_answer_task, protocol_data_task
from clonemem.tasks.reporting import log, publish_leaderboard
from clonemem.tasks.results_file import (
    check_name_reuse,
    check_system_name,
    file_answer_task,
    file_retrieve_task,
    file_run,
    given_texts,
    ranked_any,
    read_predictions_task,
    read_results_task,
)

# typed: left to infer, the runner's future type is Never, which the decorator's signature refuses
THREADS: TaskRunner[Any] = ThreadPoolTaskRunner(max_workers=8)


@flow(name="evaluate-results-file", task_runner=THREADS)
def evaluate_results_file_flow(
    warehouse_path: str,
    benchmark: str,
    path: str,
    name: str,
    ks: list[int] | None = None,
    force: bool = False,
    config: RunConfig | str | None = None,
    allow_missing: bool = False,
    replace: bool = False,
    predictions_format: str | None = None,
    key: str | None = None,
) -> ResultsFileScored:
    """Score the retrievals (and choices, answers) in the JSONL file ``path`` as the system ``name``; a name
    that already holds another file's results on the benchmark needs ``replace``. With
    ``predictions_format``, another harness's predictions in a benchmark's own layout
    (``clonemem.evaluation.predictions``), scored by the benchmark's protocols (a question without a
    prediction is left unscored)."""
    cfg = resolve_config(config)
    check_system_name(name)
    started = time.perf_counter()
    bid, bname, personas = load_task(warehouse_path, benchmark, force)
    if predictions_format is None:
        resolved = read_results_task(warehouse_path, bid, path, allow_missing)
    else:
        resolved = read_predictions_task(
            warehouse_path, bid, path, predictions_format, key, allow_missing
        )
    check_name_reuse(warehouse_path, bid, bname, resolved, name, replace)
    protocols = protocol_data_task(warehouse_path, bid, cfg.evaluation.protocols)
    run = file_run(bid, bname, name, resolved, ks, force, cfg, personas)
    ks = list(run.ks)
    with runtime.use(runtime.Runtime(cfg, run_id=run.eval_run_id, warehouse=warehouse_path)):
        lines = {p.persona_id: resolved.by_persona.get(p.persona_id, {}) for p in personas}
        reading = {
            p.persona_id: file_retrieve_task.submit(name, as_is(p), as_is(lines[p.persona_id]))
            for p in personas
        }
        retrievals = {(name, pid): f.result() for pid, f in reading.items()}
        answering = {
            (name, k, p.persona_id): file_answer_task.submit(
                name,
                k,
                as_is(p),
                as_is(retrievals[(name, p.persona_id)].value),
                as_is(lines[p.persona_id]),
            )
            for k in ks
            for p in personas
        }
        answers = {key: f.result() for key, f in answering.items()}
        # the file's answers stand for the protocols' answerers (a predictions file: only they)
        submit = protocol_answer_task.submit
        protocol_answering = (
            {
                (name, k, p.persona_id): submit(
                    name,
                    k,
                    as_is(p),
                    as_is(retrievals[(name, p.persona_id)].value),
                    as_is(protocols.for_persona(p.persona_id)),
                    given_texts(lines[p.persona_id]),
                    predictions_format is not None,
                )
                for k in ks
                for p in personas
            }
            if protocols.answers
            else {}
        )
        protocol_answers = {at: f.result() for at, f in protocol_answering.items()}
    # the calls land with the results they paid for
    calls = [
        *(c for paid in retrievals.values() for c in paid.calls),
        *(c for paid in answers.values() for c in paid.calls),
        *(c for paid in protocol_answers.values() for c in paid.calls),
    ]
    result = land_task(
        warehouse_path,
        run,
        as_is(personas),
        as_is({k: v.value for k, v in retrievals.items()}),
        as_is({k: v.value for k, v in answers.items()}),
        as_is(calls),
        as_is(protocols),
        as_is({k: v.value for k, v in protocol_answers.items()}),
        ranked_any(resolved),
    )
    result = result.model_copy(update={"seconds": round(time.perf_counter() - started, 2)})
    kind = "predictions" if predictions_format else "results"
    log(
        f"{kind} file {resolved.file} (sha256 {resolved.sha256}) scored as {name!r}: "
        f"{resolved.lines} lines, {len(resolved.missing)} questions missing"
    )
    publish_leaderboard(result, warehouse_path)
    return ResultsFileScored(
        evaluation=result,
        system=name,
        file=resolved.file,
        sha256=resolved.sha256,
        lines=resolved.lines,
        missing=len(resolved.missing),
        ks=tuple(ks),
    )
