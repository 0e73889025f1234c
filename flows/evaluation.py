"""Evaluation flow: score memory systems on a gated benchmark and land the results."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from prefect import flow
from prefect.context import FlowRunContext
from prefect.futures import as_completed
from prefect.task_runners import TaskRunner, ThreadPoolTaskRunner

from clonemem import progress, runtime
from clonemem.schemas.config import RunConfig, resolve_config
from clonemem.schemas.results import EvaluationResult
from clonemem.tasks.context import as_is
from clonemem.tasks.evaluation import (
    answer_task,
    cacheable,
    evaluated_systems,
    evaluation_run,
    land_task,
    load_task,
    protocol_answer_task,
    protocol_data_task,
    questions_asked,
    remote_resume,
    replayed,
    retrieval_depth,
    retrieval_task,
)
from clonemem.tasks.reporting import heartbeat, log, publish_leaderboard
from clonemem.tasks.runs import evaluation_record, tracked

# typed: left to infer, the runner's future type is Never, which the decorator's signature refuses
THREADS: TaskRunner[Any] = ThreadPoolTaskRunner(max_workers=8)


@flow(name="evaluate", task_runner=THREADS)
def evaluate_flow(
    warehouse_path: str,
    benchmark: str,
    systems: list[str] | None = None,
    ks: list[int] | None = None,
    force: bool = False,
    config: RunConfig | str | None = None,
    limit: int | None = None,
    sample: int | None = None,
    sample_seed: int = 0,
) -> EvaluationResult:
    """Score ``systems`` (default: the config's) at each k on ``benchmark`` (its id or name); a quick run
    asks the first ``limit`` questions, or ``sample`` of them drawn by type with ``sample_seed``."""
    cfg = resolve_config(config)
    ks = sorted(set(ks or cfg.evaluation.k))
    # remote systems are registered under their label while the run lasts; unknown names, and systems
    # that may not be replayed, fail here, before any work
    with evaluated_systems(systems or cfg.evaluation.systems, cfg) as systems:
        result = _evaluate(
            warehouse_path, benchmark, systems, ks, force, cfg, (limit, sample, sample_seed)
        )
    publish_leaderboard(result, warehouse_path)
    return result


def _evaluate(
    warehouse_path: str,
    benchmark: str,
    systems: list[str],
    ks: list[int],
    force: bool,
    cfg: RunConfig,
    quick: tuple[int | None, int | None, int] = (None, None, 0),
) -> EvaluationResult:
    started = time.perf_counter()
    bid, name, every = load_task(warehouse_path, benchmark, force)
    personas, content_hash, sampled = questions_asked(every, *quick)
    protocols = protocol_data_task(warehouse_path, bid, cfg.evaluation.protocols)
    run = evaluation_run(
        bid, name, systems, ks, force, cfg, content_hash=content_hash, sample=sampled
    )
    # Values, not futures, go in: ``as_is`` spares Prefect walking every trace and question of them
    # for dependencies (it was a third of a bm25 run's time); the cache key still hashes the values.
    # slow systems build for minutes: the log says what is under way at least every 30 s
    rt = runtime.Runtime(cfg, run_id=run.eval_run_id, warehouse=warehouse_path)
    # a failed evaluation lands nothing of its results, but its row says how it ended, with the calls it made
    with (
        tracked(warehouse_path, evaluation_record(run), rt.made),
        runtime.use(rt),
        heartbeat("evaluation"),
        tasks_in_flight(cfg.evaluation.workers),
    ):
        budget = cfg.evaluation.full_context_tokens
        # a remote system's replies are kept until this evaluation finishes: a resumed run does not ask again
        resume = remote_resume(bid) if any(not cacheable(s) for s in systems) else None
        # a ranking-scoring protocol reads deeper than k
        depth = retrieval_depth(ks, protocols, cfg)
        retrieving = {
            (s, p.persona_id): retrieval_task(s).submit(
                s,
                as_is(p),
                depth,
                budget,
                replayed(s, cfg),
                tuple(ks),
                None if cacheable(s) else resume,
            )
            for s in systems
            for p in personas
        }
        retrievals = _collect(retrieving, "evaluation: build and retrieve (system × persona)")
        answering = {
            (s, k, p.persona_id): answer_task.submit(
                s, k, as_is(p), as_is(retrievals[(s, p.persona_id)].value)
            )
            for s in systems
            for k in ks
            for p in personas
        }
        answers = _collect(answering, "evaluation: answer and judge (system × k × persona)")
        # the standard protocols' own answers and judges (none for a benchmark without protocols)
        submit = protocol_answer_task.submit
        protocol_answering = (
            {
                (s, k, p.persona_id): submit(
                    s,
                    k,
                    as_is(p),
                    as_is(retrievals[(s, p.persona_id)].value),
                    as_is(protocols.for_persona(p.persona_id)),
                )
                for s in systems
                for k in ks
                for p in personas
            }
            if protocols.answers
            else {}
        )
        protocol_answers = _collect(
            protocol_answering, "evaluation: protocol answers (system × k × persona)"
        )
    # the calls land with the results they paid for
    paid_for = (*retrievals.values(), *answers.values(), *protocol_answers.values())
    calls = [c for paid in paid_for for c in paid.calls]
    result = land_task(
        warehouse_path,
        run,
        as_is(personas),
        as_is({k: v.value for k, v in retrievals.items()}),
        as_is({k: v.value for k, v in answers.items()}),
        as_is(calls),
        as_is(protocols),
        as_is({k: v.value for k, v in protocol_answers.items()}),
    )
    if resume is not None:
        remote_resume(bid, renew=True)  # finished: the next evaluation asks the servers again
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
