"""Where a task or flow runs: the Prefect flow run (and deployment) it belongs to, so warehouse run
rows can be matched to runs in Prefect's UI."""

from __future__ import annotations

import uuid


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
