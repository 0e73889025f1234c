"""`gym`: on-policy evaluation (after AMemGym)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from clonemem.cli.app import app, warehouse_for, writing
from clonemem.cli.exit import handles_errors
from clonemem.cli.options import config_for_run, system_names, write_json

if TYPE_CHECKING:
    from clonemem.schemas.config import RunConfig


@app.command("gym")
@handles_errors
def gym(
    config: Annotated[
        Path,
        typer.Option(
            "--config", help="run configuration (TOML); its [gym] section sets N_p, N_s, N_i"
        ),
    ],
    systems: Annotated[
        str,
        typer.Option(
            "--systems",
            help="comma-separated memory systems (see `clonemem systems`) or the controls "
            "oracle_states, no_memory",
        ),
    ],
    json_out: Annotated[
        Path | None, typer.Option("--json", help="also write the results to this JSON file")
    ] = None,
    estimate: Annotated[
        bool,
        typer.Option(
            "--estimate",
            help="price the run, the simulated user included (an offline dry run); call no API",
        ),
    ] = False,
    max_cost: Annotated[
        float | None,
        typer.Option(
            "--max-cost", min=0.0, help="stop before new spend would exceed this many USD"
        ),
    ] = None,
) -> None:
    """On-policy evaluation (after AMemGym): a simulated user talks to each system's assistant.

    Its memory is asked state-dependent questions after every period; prints accuracy by position,
    memory scores and the on- vs off-policy rank table (exit 3 when the openings fail the exposure
    gate)."""
    from clonemem.gym.run import check_systems

    cfg = config_for_run(config, max_cost, check_keys=not estimate)
    names = system_names(systems)
    check_systems(names, cfg.gym.reference)
    if estimate:
        return print_estimate(cfg, names)
    from clonemem.prefect_env import on_early_server, start_server_early

    start_server_early()
    from clonemem.flows.gym import gym_flow
    from clonemem.gym.metrics import table
    from clonemem.progress import shown

    warehouse = warehouse_for(cfg.warehouse).expanduser().resolve()
    with writing(warehouse), shown(), on_early_server():
        result = gym_flow(str(warehouse), names, cfg)
    typer.echo(table(result))
    if json_out is not None:
        write_json(json_out, result.report)


def print_estimate(cfg: RunConfig, names: list[str]) -> None:
    from clonemem.cost import estimate_gym
    from clonemem.prefect_env import die_with_parent_server

    die_with_parent_server()
    typer.echo(estimate_gym(cfg, names).table())
