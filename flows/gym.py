"""The gym flow (on-policy evaluation after AMemGym): structured data per persona, the exposure gate,
every system's interaction with the simulated user (and the reference's transcript replayed to each
system, off-policy), scoring, and one landing with the run's provenance and calls."""

from __future__ import annotations

import time
from contextlib import nullcontext

from prefect import flow

from clonemem import runtime
from clonemem.schemas.config import RunConfig, resolve_config
from clonemem.schemas.gym import GymResult
from clonemem.tasks.context import as_is
from clonemem.tasks.gym import (
    blueprint_task,
    gate_task,
    gym_personas,
    interact_task,
    land_gym_task,
    score_task,
)
from clonemem.tasks.reporting import log
from clonemem.tasks.runs import begin_run_task, flow_run_record, opener, tracked

ORACLE_STATES = "oracle_states"  # the upper bound's assistant, always run (clonemem.gym.interact)


@flow(name="gym")
def gym_flow(
    warehouse_path: str | None, systems: list[str], config: RunConfig | str | None = None
) -> GymResult:
    """Run the gym for ``systems`` on the config's personas; land in ``warehouse_path`` (None: nothing lands)."""
    cfg = resolve_config(config)
    started = time.perf_counter()
    personas = gym_personas(cfg, systems)
    begun = flow_run_record("gym", cfg)
    run = begin_run_task(warehouse_path, begun) if warehouse_path else begun
    rt = runtime.Runtime(
        cfg,
        run_id=run.run_id,
        warehouse=warehouse_path,
        on_start=opener(warehouse_path, run) if warehouse_path else None,
    )
    with (
        tracked(warehouse_path, run, rt.made) if warehouse_path else nullcontext(),
        runtime.use(rt),
    ):
        made = [blueprint_task(cfg, p) for p in personas]
        blueprints = [m.value for m in made]
        gate = gate_task(as_is(blueprints), cfg.gym.min_exposure_rate)
        gym, seed, budget = cfg.gym, cfg.seed, cfg.evaluation.full_context_tokens
        names = list(dict.fromkeys([*systems, ORACLE_STATES, cfg.gym.reference]))
        talking = {
            (s, i): interact_task.submit(s, "on", as_is(b), gym, seed, budget)
            for s in names
            for i, b in enumerate(blueprints)
        }
        on = {key: f.result() for key, f in talking.items()}
        reference = [on[(cfg.gym.reference, i)].value.turns for i in range(len(blueprints))]
        replaying = {
            (s, i): interact_task.submit(s, "off", as_is(b), gym, seed, budget, as_is(reference[i]))
            for s in systems
            for i, b in enumerate(blueprints)
        }
        off = {key: f.result() for key, f in replaying.items()}
        on_by = {s: [on[(s, i)].value for i in range(len(blueprints))] for s in names}
        off_by = {s: [off[(s, i)].value for i in range(len(blueprints))] for s in systems}
        result = score_task(
            cfg, run.run_id, systems, len(personas), as_is(on_by), as_is(off_by), gate
        )
        calls = [c for paid in made for c in paid.calls] + [
            c for paid in [*on.values(), *off.values()] for c in paid.calls
        ]
        if warehouse_path:
            land_gym_task(
                warehouse_path,
                run,
                cfg,
                systems,
                as_is(blueprints),
                as_is(on_by),
                as_is(off_by),
                result,
                as_is(calls),
            )
    result = result.model_copy(
        update={
            "llm_calls": len(calls),
            "landed": bool(warehouse_path),
            "seconds": round(time.perf_counter() - started, 2),
        }
    )
    log(
        f"gym {cfg.name}: {len(systems)} system(s), {len(personas)} persona(s), exposure {gate.rate:.1%}, "
        f"{len(calls)} LLM calls"
    )
    return result
