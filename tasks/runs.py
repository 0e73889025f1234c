"""A flow run's row in ``runs`` from start to finish (see :mod:`clonemem.warehouse.runs`): a flow begins
the run, gives the runtime its :func:`opener`, works inside :func:`tracked` and records the finished run
(``record_run_task``)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from prefect import task
from prefect.cache_policies import NO_CACHE

from clonemem import interrupts
from clonemem.errors import one_line
from clonemem.evaluation.land import EvaluationRun
from clonemem.ids import benchmark_id
from clonemem.llm.types import BudgetExceeded, CallRecord
from clonemem.schemas.config import RunConfig, resolve_config
from clonemem.tasks.context import flow_run_ids, new_run_id
from clonemem.warehouse import Warehouse, owners
from clonemem.warehouse.landing import new_calls
from clonemem.warehouse.runs import (
    FailureRecord,
    RunKind,
    RunNotRecorded,
    RunRecord,
    RunStatus,
    begin_run,
    interrupt_own_runs,
    open_run,
    record_run,
    utcnow,
)

log = logging.getLogger(__name__)


def flow_run_record(kind: RunKind, config: RunConfig | None, with_config: bool = True) -> RunRecord:
    """This flow run's row for the config's benchmark, started now: its Prefect ids (a run id of its own
    outside Prefect) and, ``with_config``, the config it ran with (without the warehouse path). Without a
    config (it could not be read), a row with no benchmark."""
    flow_run_id, deployment_id = flow_run_ids()
    me = owners.this_process()  # so a row this process leaves `running` when killed is found out
    return RunRecord(
        flow_run_id or new_run_id(),
        kind,
        benchmark_id(config.name) if config else None,
        utcnow(),
        flow_run_id=flow_run_id,
        deployment_id=deployment_id,
        config_json=config.model_dump_json(exclude={"warehouse"})
        if config and with_config
        else None,
        host=me.host,
        pid=me.pid,
        process_start=me.process_start,
    )


def run_config(
    warehouse_path: str, kind: RunKind, config: RunConfig | dict | str | None
) -> RunConfig:
    """The flow's config; one that cannot be read (a missing file, a bad field) still leaves a ``failed``
    row of the run, with no benchmark, in a warehouse that exists (a nightly run that never started is
    seen on the Runs page; no warehouse is created for it)."""
    try:
        return resolve_config(config)
    except Exception:
        if not Path(warehouse_path).exists():
            raise
        with tracked(warehouse_path, flow_run_record(kind, None)):
            raise


@task(cache_policy=NO_CACHE, task_run_name="begin {run.kind} run")
def begin_run_task(warehouse_path: str, run: RunRecord) -> RunRecord:
    """The run with the unfinished run it resumes (runs left ``running`` by a dead process are marked
    ``crashed``); its row is written now only when it resumes one, else before its first call."""
    with Warehouse.open_writer(warehouse_path) as wh:
        resumed = begin_run(wh, run.kind, run.benchmark_id, run.run_id)
        run = replace(run, resumed_from=resumed, status="running")
        if resumed is not None:
            open_run(wh, run)
    return run


@task(cache_policy=NO_CACHE, task_run_name="open {run.kind} run")
def open_run_task(warehouse_path: str, run: RunRecord) -> RunRecord | None:
    """Write the run's ``running`` row now, at its start (runs left ``running`` by a dead process, and earlier
    runs of its kind and benchmark still ``running``, become ``crashed``); the row as written. None when the
    warehouse does not exist yet: a first run creates it only when it lands something."""
    if not Path(warehouse_path).exists():
        return None
    with Warehouse.open_writer(warehouse_path) as wh:
        run = replace(
            run,
            resumed_from=begin_run(wh, run.kind, run.benchmark_id, run.run_id),
            status="running",
        )
        open_run(wh, run)
    return run


def opener(warehouse_path: str, run: RunRecord) -> Callable[[], None]:
    """The runtime's ``on_start``: write the run's ``running`` row (called once, from a task's thread)."""

    def start() -> None:
        try:
            with Warehouse.open_writer(warehouse_path) as wh:
                open_run(wh, run)
        except Exception as exc:  # no call may go out that the warehouse could not own
            raise RunNotRecorded(
                f"{warehouse_path}: cannot record the run: {one_line(exc)}"
            ) from exc

    return start


def evaluation_record(run: EvaluationRun) -> RunRecord:
    """The ``runs`` row of an evaluation (written only when it fails: a landed one is in ``eval_runs``)."""
    me = owners.this_process()
    return RunRecord(
        run.eval_run_id,
        "evaluate",
        run.benchmark_id,
        run.started_at,
        status="running",
        flow_run_id=run.flow_run_id,
        host=me.host,
        pid=me.pid,
        process_start=me.process_start,
    )


def finish_run(
    wh: Warehouse,
    run: RunRecord,
    failures: Sequence[FailureRecord] = (),
    calls: Sequence[CallRecord] = (),
) -> int:
    """The run's final row, with the calls it made that no landing took (failed calls, the calls of work
    that failed or never landed), in one transaction: every call spent is on record, owned by its run.
    Returns how many calls it landed."""
    with wh.transaction():
        record_run(wh, run, failures)
        left = new_calls(wh, calls)
        wh.upsert("llm_calls", [c.row() for c in left])
    return len(left)


def ended_by(exc: BaseException) -> RunStatus:
    """How a run that raised ``exc`` ended: ``interrupted`` once Ctrl-C arrived (whatever error its unwinding
    raised on the way: Prefect's engine may raise its own, e.g. "Task run is not set"), ``budget`` at the
    cost budget, else ``failed``."""
    if isinstance(exc, KeyboardInterrupt) or interrupts.received():
        return "interrupted"
    return "budget" if isinstance(exc, BudgetExceeded) else "failed"


@contextmanager
def tracked(
    warehouse_path: str, run: RunRecord, made: Callable[[], Sequence[CallRecord]] | None = None
) -> Iterator[None]:
    """On an error, the run's row says how it ended (:func:`ended_by`; ``failed`` with the error's first
    line), with the calls ``made`` returns that no landing took (:func:`finish_run`), and the error goes on.
    Written directly, not as a task: the flow is failing, and a warehouse that cannot take the row (a full
    disk) must not hide the first error."""
    try:
        yield
    except BaseException as exc:
        status = ended_by(exc)
        error = one_line(exc)[:2000]
        if status == "interrupted" and not isinstance(exc, KeyboardInterrupt):
            error = f"KeyboardInterrupt (raised while unwinding: {error})"[:2000]
        try:
            with Warehouse.open_writer(warehouse_path) as wh:
                finish_run(wh, run.finished(status, error=error), calls=made() if made else ())
                if status == "interrupted":  # the runs of this process that other threads ran
                    interrupt_own_runs(wh, error)
        except Exception as secondary:  # the first error is the one to report
            log.warning(
                "run %s: could not record its %s status: %s",
                run.run_id,
                status,
                one_line(secondary),
            )
        raise
