"""Where a task or flow runs: the Prefect flow run (and deployment) it belongs to, so warehouse run
rows can be matched to runs in Prefect's UI; and how a task is handed a large value."""

from __future__ import annotations

import uuid
from typing import TypeVar, cast

from prefect.utilities.annotations import opaque

T = TypeVar("T")


def flow_run_ids() -> tuple[str | None, str | None]:
    """(flow run id, deployment id) of the current Prefect flow run, or Nones outside one."""
    from prefect.context import FlowRunContext

    ctx = FlowRunContext.get()
    if ctx is None or ctx.flow_run is None:
        return None, None
    deployment = ctx.flow_run.deployment_id
    return str(ctx.flow_run.id), str(deployment) if deployment else None


def new_run_id() -> str:
    """A run id outside Prefect (a library call of a flow's function)."""
    return str(uuid.uuid4())


def as_is(value: T) -> T:
    """``value`` for a task's parameter, handed over without Prefect walking it: Prefect visits every
    element of a task's arguments twice, looking for futures and states to wait for (a landing's rows and
    calls: thousands of dicts and records, 0.4 s of a tiny pipeline's landings). Only for values that hold
    none; the task receives ``value`` itself (Prefect's ``opaque``, removed before the task runs; typed as
    the value, so a call stays checked against the task's signature)."""
    return cast(T, opaque(value))
