"""Evaluation flow: score memory systems on a gated benchmark and land the results."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

from prefect import flow
from prefect.context import FlowRunContext
from prefect.futures import as_completed
from prefect.task_runners import ThreadPoolTaskRunner
from prefect.utilities.annotations import opaque

from clonemem import progress, runtime
from clonemem.schemas.config import RunConfig, resolve_config
from clonemem.schemas.results import EvaluationResult
from clonemem.tasks.evaluation import (
    answer_task,
    evaluated_systems,
    evaluation_run,
    land_task,
    load_task,
    retrieval_task,
)
from clonemem.tasks.reporting import heartbeat, log, publish_leaderboard
from clonemem.tasks.runs import evaluation_record, tracked


@flow(name="evaluate", task_runner=ThreadPoolTaskRunner(max_workers=8))
def evaluate_flow(warehouse_path: str, benchmark: str, systems: list[str] | None = None, ks: list[int] | None = None,
                  force: bool = False, config: RunConfig | str | None = None) -> EvaluationResult:
    """Score ``systems`` (default: the config's) at each k on ``benchmark`` (its id or name)."""
    cfg = resolve_config(config)
    ks = sorted(set(ks or cfg.evaluation.k))
    # remote systems are registered under their label while the run lasts; unknown names, and systems
    # that may not be replayed, fail here, before any work
    with evaluated_systems(systems or cfg.evaluation.systems, cfg) as systems:
        result = _evaluate(warehouse_path, benchmark, systems, ks, force, cfg)
    publish_leaderboard(result)
    return result


def _evaluate(warehouse_path: str, benchmark: str, systems: list[str], ks: list[int], force: bool,
              cfg: RunConfig) -> EvaluationResult:
    started = time.perf_counter()
    bid, name, personas = load_task(warehouse_path, benchmark, force)
    run = evaluation_run(bid, name, systems, ks, force, cfg)
    # Values, not futures, go in: ``opaque`` spares Prefect walking every trace and question of them
    # for dependencies (it was a third of a bm25 run's time); the cache key still hashes the values.
    # slow systems build for minutes: the log says what is under way at least every 30 s
    rt = runtime.Runtime(cfg, run_id=run.eval_run_id, warehouse=warehouse_path)
    # a failed evaluation lands nothing of its results, but its row says how it ended, with the calls it made
    with tracked(warehouse_path, evaluation_record(run), rt.made), runtime.use(rt), heartbeat("evaluation"), \
            tasks_in_flight(cfg.evaluation.workers):
        budget = cfg.evaluation.full_context_tokens
        replay = cfg.evaluation.replay
        retrieving = {(s, p.persona_id): retrieval_task(s).submit(s, opaque(p), max(ks), budget, replay)
                      for s in systems for p in personas}
        retrievals = _collect(retrieving, "evaluation: build and retrieve (system × persona)")
        answering = {(s, k, p.persona_id): answer_task.submit(s, k, opaque(p),
                                                                   opaque(retrievals[(s, p.persona_id)].value))
                     for s in systems for k in ks for p in personas}
        answers = _collect(answering, "evaluation: answer and judge (system × k × persona)")
    # the calls land with the results they paid for
    calls = [c for paid in (*retrievals.values(), *answers.values()) for c in paid.calls]
    result = land_task(warehouse_path, run, opaque(personas), opaque({k: v.value for k, v in retrievals.items()}),
                       opaque({k: v.value for k, v in answers.items()}), opaque(calls))
    return result.model_copy(update={"seconds": round(time.perf_counter() - started, 2)})


@contextmanager
def tasks_in_flight(workers: int) -> Iterator[None]:
    """This flow run's tasks submitted here run on ``workers`` threads (`evaluation.workers`): Prefect fixes
    a flow's own task runner when the flow is decorated, before any config is read."""
    context = FlowRunContext.get()
    if context is None:  # not in a flow run: nothing submits here
        yield
        return
    runner: ThreadPoolTaskRunner[object] = ThreadPoolTaskRunner(max_workers=workers)
    with runner, context.model_copy(update={"task_runner": runner}):
        yield


def _collect(futures: dict, what: str) -> dict:
    """Wait for every future, reporting progress and logging each system as its last part finishes.

    A failure is raised once every future has finished: the tasks still running need the run's context,
    which leaving here early would tear down under them."""
    left = Counter(key[0] for key in futures)
    key_of = {id(f): k for k, f in futures.items()}
    done, failed = {}, None
    for i, fut in enumerate(as_completed(list(futures.values())), 1):
        key = key_of[id(fut)]
        try:
            done[key] = fut.result()
        except Exception as exc:
            failed = failed or exc
            continue
        progress.advance(what, i, len(futures))
        left[key[0]] -= 1
        if not left[key[0]]:
            log(f"{what}: {key[0]} done")
    if failed is not None:
        raise failed
    return {key: done[key] for key in futures}
