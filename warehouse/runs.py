"""Run records: one row per flow run (its Prefect flow-run id and deployment, when there is one), with
what it was asked and what it did, so a run in Prefect's UI can be matched to its rows.

A run's row has a lifecycle, so every LLM call has a run that exists:

- ``begin_run`` when a run starts: runs of the same kind and benchmark still ``running`` were left so
  by a process that died (the writer lock lets one command write at a time), and so is any ``running``
  row whose recorded process (``host``, ``pid``, ``process_start``: :mod:`clonemem.warehouse.owners`) is
  known to have ended: they become ``crashed``, with what is known in ``error`` (:func:`reap_orphans`);
  the most recent run of that kind and benchmark, when it did not complete, is the one this run
  resumes (``resumed_from``).
- ``open_run`` writes the row with status ``running`` before the run's first LLM call (a re-run served
  wholly from the cache writes nothing, so the warehouse stays byte-for-byte the same).
- ``record_run`` finishes it: ``completed``, ``failed`` (with the error), ``interrupted`` (Ctrl-C) or
  ``budget`` (stopped at ``--max-cost``). ``crashed`` is never recorded by the run itself: a process
  that ends unannounced (SIGKILL, a killed worker, a reboot) is found out later, as above; readers (the
  dashboard) show such a row as crashed before any run has marked it.
- ``adopt_runs`` in every landing: a call whose run has no row (a worker's persona run behind a bundle)
  gets one, in the same transaction.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from clonemem.llm.types import CallRecord
    from clonemem.warehouse.db import Warehouse

RunKind = Literal["import", "generate", "qa", "gate", "evaluate", "pipeline", "gym"]
RunStatus = Literal["running", "completed", "failed", "interrupted", "budget", "crashed"]
FINISHED: tuple[RunStatus, ...] = ("completed", "failed", "interrupted", "budget", "crashed")


class RunNotRecorded(RuntimeError):
    """The run's row could not be written (e.g. the disk is full): no call may go out unowned, so the
    run stops."""


def stops_run(exc: BaseException) -> bool:
    """Whether an error of one step stops the whole run (instead of failing that item): the budget, a
    provider that refuses the key or model (every further call would fail alike), an unrecordable run."""
    from clonemem.llm.types import BudgetExceeded, ProviderRejected

    return isinstance(exc, (BudgetExceeded, ProviderRejected, RunNotRecorded))


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


@dataclass(frozen=True)
class RunRecord:
    run_id: str  # the Prefect flow-run id when run as a flow
    kind: RunKind
    benchmark_id: str | None
    started_at: dt.datetime
    status: RunStatus = "completed"
    flow_run_id: str | None = None
    deployment_id: str | None = None
    config_json: str | None = None
    summary_json: str | None = None
    resumed_from: str | None = (
        None  # the unfinished run of the same kind and benchmark this one took over
    )
    error: str | None = None  # why a failed run failed (one line)
    # the process running it (clonemem.warehouse.owners): what tells an orphaned `running` row
    host: str | None = None
    pid: int | None = None
    process_start: str | None = None

    def finished(
        self, status: RunStatus, error: str | None = None, summary_json: str | None = None
    ) -> RunRecord:
        return replace(
            self, status=status, error=error, summary_json=summary_json or self.summary_json
        )


@dataclass(frozen=True)
class FailureRecord:
    """A generation step that kept failing (the persona went on without it)."""

    persona: str
    stage: str
    item: str
    error: str


# when a run found dead finished, as far as the warehouse knows: when its last landed call ended
_LAST_CALL_END = """coalesce((SELECT max(c.started_at + to_milliseconds(c.latency_ms::BIGINT)) FROM llm_calls c
                             WHERE c.run_id = runs.run_id), started_at)"""
SAME_KIND_GONE = (
    "crashed: found still running by the next run of its kind and benchmark (its process ended "
    "without recording how the run ended)"
)


def begin_run(wh: Warehouse, kind: RunKind, benchmark_id: str | None, run_id: str) -> str | None:
    """Mark this kind's runs of the benchmark left ``running``, and every run whose process is known to have
    ended, as ``crashed`` (a write only when there are any); return the id of the run this one resumes:
    the latest of its kind and benchmark, if it did not complete."""
    reap_orphans(wh)
    same = "kind = ? AND benchmark_id IS NOT DISTINCT FROM ? AND run_id <> ?"
    params = [kind, benchmark_id, run_id]
    if wh.scalar(f"SELECT count(*) FROM runs WHERE {same} AND status = 'running'", params):
        wh.execute(
            f"""UPDATE runs SET status = 'crashed', finished_at = {_LAST_CALL_END},
                           error = coalesce(error, ?)
                       WHERE {same} AND status = 'running'""",
            [SAME_KIND_GONE, *params],
        )
    last = wh.rows(
        f"SELECT run_id, status FROM runs WHERE {same} ORDER BY started_at DESC, run_id LIMIT 1",
        params,
    )
    return last[0][0] if last and last[0][1] != "completed" else None


def orphaned(rows: Sequence[tuple[str, str | None, int | None, str | None]]) -> dict[str, str]:
    """Of ``(run_id, host, pid, process_start)`` rows of ``running`` runs, those whose process is known to
    have ended, with the error line that says so."""
    from clonemem.warehouse import owners

    return {
        run_id: owners.gone_message(host, pid)
        for run_id, host, pid, start in rows
        if host is not None and pid is not None and owners.is_gone(host, pid, start)
    }


def reap_orphans(wh: Warehouse) -> list[str]:
    """Mark ``crashed`` every ``running`` run whose process (on this host) is known to have ended; their ids."""
    dead = orphaned(
        wh.rows(
            "SELECT run_id, host, pid, process_start FROM runs WHERE status = 'running' "
            "AND pid IS NOT NULL ORDER BY run_id"
        )
    )
    for run_id, error in dead.items():
        wh.execute(
            f"UPDATE runs SET status = 'crashed', finished_at = {_LAST_CALL_END}, error = ? "
            "WHERE run_id = ? AND status = 'running'",
            [error, run_id],
        )
    return list(dead)


def interrupt_own_runs(wh: Warehouse, error: str) -> list[str]:
    """Mark ``interrupted`` every run this process still has ``running``; their ids. Ctrl-C reaches the main
    thread only: a stage's flow finishing in another thread (generation's, while stage IV has begun) never
    sees it, and its row would stay ``running`` when the process leaves."""
    from clonemem.warehouse import owners

    me = owners.this_process()
    ids = [
        run_id
        for (run_id,) in wh.rows(
            "SELECT run_id FROM runs WHERE status = 'running' AND host = ? AND pid = ? "
            "AND process_start IS NOT DISTINCT FROM ? ORDER BY run_id",
            [me.host, me.pid, me.process_start],
        )
    ]
    for run_id in ids:
        wh.execute(
            "UPDATE runs SET status = 'interrupted', finished_at = ?, error = ? "
            "WHERE run_id = ? AND status = 'running'",
            [utcnow(), error, run_id],
        )
    return ids


def open_run(wh: Warehouse, run: RunRecord) -> None:
    """The run's row with status ``running``, unless it already has one."""
    if wh.scalar("SELECT count(*) FROM runs WHERE run_id = ?", [run.run_id]):
        return
    wh.upsert("runs", [{**_row(run), "status": "running", "finished_at": None, "error": None}])


def record_run(wh: Warehouse, run: RunRecord, failures: Sequence[FailureRecord] = ()) -> None:
    """Finish the run's row with its status (written whole: also for a run that never opened one)."""
    with wh.transaction():
        wh.upsert("runs", [{**_row(run), "finished_at": utcnow()}])
        wh.upsert(
            "generation_failures",
            [
                {
                    "run_id": run.run_id,
                    "benchmark_id": run.benchmark_id,
                    "persona_key": f.persona,
                    "stage": f.stage,
                    "item": f.item,
                    "error": f.error,
                }
                for f in failures
            ],
        )


def adopt_runs(
    wh: Warehouse,
    calls: Sequence[CallRecord],
    kind: RunKind,
    benchmark_id: str | None,
    status: RunStatus,
) -> None:
    """A row for each run that made some of ``calls`` and has none (inside the landing's transaction):
    ``status`` says what is known of it (a bundle's persona run completed)."""
    by_run: dict[str, list[CallRecord]] = {}
    for c in calls:
        if c.run_id is not None:
            by_run.setdefault(c.run_id, []).append(c)
    if not by_run:
        return
    known = {
        r[0]
        for r in wh.rows(
            "SELECT run_id FROM runs WHERE run_id IN (SELECT unnest(?::VARCHAR[]))", [list(by_run)]
        )
    }
    wh.upsert(
        "runs",
        [
            {
                "run_id": run_id,
                "kind": kind,
                "benchmark_id": benchmark_id,
                "status": status,
                "started_at": min(c.started_at for c in made),
                "finished_at": max(
                    c.started_at + dt.timedelta(milliseconds=c.latency_ms) for c in made
                ),
            }
            for run_id, made in by_run.items()
            if run_id not in known
        ],
    )


def _row(run: RunRecord) -> dict[str, Any]:
    return dict(run.__dict__)
