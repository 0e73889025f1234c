"""Run records: one row per flow run (its Prefect flow-run id and deployment, when there is one), with
what it was asked and what it did, so a run in Prefect's UI can be matched to its rows."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from clonemem.warehouse.db import Warehouse

RunKind = Literal["import", "generate", "qa", "gate", "evaluate", "pipeline"]


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


@dataclass(frozen=True)
class RunRecord:
    run_id: str  # the Prefect flow-run id when run as a flow
    kind: RunKind
    benchmark_id: str | None
    started_at: dt.datetime
    status: Literal["completed", "failed"] = "completed"
    flow_run_id: str | None = None
    deployment_id: str | None = None
    config_json: str | None = None
    summary_json: str | None = None


@dataclass(frozen=True)
class FailureRecord:
    """A generation step that kept failing (the persona went on without it)."""

    persona: str
    stage: str
    item: str
    error: str


def record_run(wh: Warehouse, run: RunRecord, failures: Sequence[FailureRecord] = ()) -> None:
    with wh.transaction():
        wh.upsert("runs", [{**run.__dict__, "finished_at": utcnow()}])
        wh.upsert("generation_failures", [
            {"run_id": run.run_id, "benchmark_id": run.benchmark_id, "persona_key": f.persona, "stage": f.stage,
             "item": f.item, "error": f.error} for f in failures])
