"""`generate`, `run` (the whole pipeline), `gate`, `land` and `demo`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from clonemem.cli import render
from clonemem.cli.app import State, app, warehouse_for, writing
from clonemem.cli.exit import fail, handles_errors, usage
from clonemem.cli.options import config_for_run, ks, system_names, write_json
from clonemem.errors import ExitCode

if TYPE_CHECKING:
    from clonemem.schemas.config import RunConfig
    from clonemem.schemas.results import PipelineResult

Config = Annotated[Path, typer.Option("--config", help="run configuration (TOML)")]
Estimate = Annotated[
    bool, typer.Option("--estimate", help="price the run (an offline dry run); call no API")
]
MaxCost = Annotated[
    float | None,
    typer.Option("--max-cost", min=0.0, help="stop before new spend would exceed this many USD"),
]


@app.command("generate")
@handles_errors
def generate(
    config: Config,
    persona: Annotated[
        int | None,
        typer.Option("--persona", help="generate only this persona index (scale-out)"),
    ] = None,
    bundle: Annotated[
        str | None,
        typer.Option(
            "--bundle",
            help="with --persona: write the persona here instead of landing (a path or any "
            "fsspec URL)",
        ),
    ] = None,
    allow_empty_config: Annotated[
        bool,
        typer.Option(
            "--allow-empty-config", help="accept a config file with no settings (all defaults)"
        ),
    ] = False,
    estimate: Estimate = False,
    max_cost: MaxCost = None,
) -> None:
    """Run generation stages I–IV and the gate; prints the benchmark id (exit codes: see the README)."""
    cfg = config_for_run(config, max_cost, allow_empty_config, check_keys=not estimate)
    if estimate:
        return print_estimate(cfg)
    if (persona is None) != (bundle is None):
        usage("--persona and --bundle go together")
    if persona is not None and bundle is not None:
        from clonemem import interrupts
        from clonemem.flows.generation import generate_persona_flow
        from clonemem.prefect_env import die_with_parent_server

        interrupts.note_writes()  # the bundle, and the task cache
        die_with_parent_server()
        out = generate_persona_flow(persona, str(bundle), cfg)
        render.err(f"persona {persona} written to {bundle} ({out.failures} failed items)")
        return
    result = run_pipeline(cfg, evaluate=False, export_dir=None)  # generation only: no export
    typer.echo(result.benchmark_id)


@app.command("run")
@handles_errors
def run(
    config: Config,
    systems: Annotated[
        str,
        typer.Option("--systems", help="comma-separated; default: the config's evaluation.systems"),
    ] = "",
    k: Annotated[
        str, typer.Option("--k", help="retrieval depths, comma-separated; default: the config's")
    ] = "",
    out: Annotated[
        Path | None,
        typer.Option("--out", help="export the benchmark in the release format here"),
    ] = None,
    json_out: Annotated[
        Path | None,
        typer.Option("--json", help="also write the evaluation results to this JSON file"),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="evaluate even when the gate fails")
    ] = False,
    estimate: Estimate = False,
    max_cost: MaxCost = None,
) -> None:
    """The whole pipeline (the `pipeline` flow): generate → QA → gate → evaluate → export."""
    cfg = config_for_run(config, max_cost, check_keys=not estimate)
    if estimate:
        return print_estimate(cfg)
    names = system_names(systems) if systems else None
    depths = ks(k) if k else None
    result = run_pipeline(cfg, evaluate=True, systems=names, ks=depths, force=force, export_dir=out)
    assert result.evaluation is not None
    typer.echo(render.leaderboard(result.evaluation))
    if json_out is not None:
        write_json(json_out, result.evaluation)
    if result.export is not None:
        render.err(f"exported to {result.export.folder}")


def print_estimate(cfg: RunConfig) -> None:
    from clonemem.cost import estimate  # lazy: prices every stage through the offline world
    from clonemem.prefect_env import die_with_parent_server

    die_with_parent_server()
    render.estimate(estimate(cfg), cfg)


def run_pipeline(
    cfg: RunConfig,
    *,
    evaluate: bool,
    export_dir: Path | None,
    systems: list[str] | None = None,
    ks: list[int] | None = None,
    force: bool = False,
) -> PipelineResult:
    """Run the `pipeline` flow holding the warehouse, printing each part's summary; map failures to
    exit codes."""
    from clonemem.expectations.gate import GateFailed
    from clonemem.flows.pipeline import NothingGenerated, pipeline_flow
    from clonemem.progress import shown

    warehouse = warehouse_for(cfg.warehouse).expanduser().resolve()
    with writing(warehouse), shown():
        try:
            result: PipelineResult = pipeline_flow(
                str(warehouse),
                cfg,
                evaluate=evaluate,
                systems=systems,
                ks=ks,
                force=force,
                export_dir=None if export_dir is None else str(export_dir),
            )
        except NothingGenerated as exc:
            if exc.generation is not None:
                render.generation(exc.generation, warehouse)
            fail(str(exc), ExitCode.NOTHING_GENERATED)
        except GateFailed as exc:
            if exc.pipeline is not None:
                render.generation(exc.pipeline.generation, warehouse)
                render.qa(exc.pipeline.qa)
            render.gate(exc.result)
            fail(
                f"benchmark {cfg.name!r} was stored but failed the gate (see the failed "
                "expectations above): fix the config and generate again, or evaluate it anyway "
                f"with `clonemem evaluate {cfg.name} --force`",
                ExitCode.GATE_FAILED,
            )
    render.generation(result.generation, warehouse)
    render.qa(result.qa)
    if not (result.generation.landed or result.qa.landed) and result.gate_status == "passed":
        render.err(f"gate: content unchanged since the last gate run; status {result.gate_status}")
    else:
        forced = f" (forced past: {'; '.join(result.gate_failed)})" if result.gate_failed else ""
        render.err(f"gate {result.gate_status}{forced}")
    return result


@app.command("gate")
@handles_errors
def gate(benchmark: Annotated[str, typer.Argument(help="benchmark id or name")]) -> None:
    """Run the Great Expectations gate; exit 3 when the benchmark fails it."""
    from clonemem.expectations.gate import GateFailed
    from clonemem.flows.gate import gate_flow

    with writing(State.warehouse):
        try:
            result = gate_flow(str(State.warehouse.expanduser().resolve()), benchmark)
        except GateFailed as exc:
            render.gate(exc.result)
            fail(
                f"benchmark {benchmark!r} failed the gate (see above); `clonemem evaluate` refuses "
                "it unless --force",
                ExitCode.GATE_FAILED,
            )
    render.gate(result)


@app.command("land")
@handles_errors
def land_bundles(
    bundles: Annotated[
        list[str],
        typer.Argument(help="persona bundles from `generate --persona` (paths or fsspec URLs)"),
    ],
) -> None:
    """Land persona bundles generated elsewhere into this warehouse (one writer, many generators)."""
    from clonemem.generation.land import land_bundle_files
    from clonemem.warehouse import Warehouse

    with (
        writing(State.warehouse, runs_flows=False),
        Warehouse.open_writer(State.warehouse, wait_s=State.wait) as wh,
    ):
        for path, changed in land_bundle_files(wh, bundles):
            typer.echo(f"{path}: {'landed' if changed else 'unchanged'}")


@app.command("demo")
@handles_errors
def demo(
    out: Annotated[Path, typer.Option("--out", help="folder for exports")] = Path("clonemem-demo"),
) -> None:
    """Run the pipeline end to end on the offline default and print where everything landed."""
    from clonemem.demo import run_demo
    from clonemem.progress import shown

    with writing(State.warehouse), shown():
        run_demo(State.warehouse, out, echo=typer.echo)
