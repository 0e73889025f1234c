"""`evaluate` (memory systems, or a results file made elsewhere), `export-retrievals`, `systems`."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from clonemem.cli import render
from clonemem.cli.app import State, app, writing
from clonemem.cli.exit import fail, handles_errors, usage
from clonemem.cli.options import ks, system_names, with_aggregation, write_json
from clonemem.cli.options import name as checked_name
from clonemem.errors import ExitCode

if TYPE_CHECKING:
    from clonemem.evaluation.results_file import ResolvedFile
    from clonemem.schemas.config import RunConfig
    from clonemem.schemas.results_file import ResultsFileScored
    from clonemem.warehouse import Warehouse


@app.command("evaluate")
@handles_errors
def evaluate(
    benchmark: Annotated[str, typer.Argument(help="benchmark id or name")],
    systems: Annotated[
        str,
        typer.Option(
            "--systems",
            help="comma-separated: names (see `clonemem systems`), memory-protocol URLs, NAME=URL",
        ),
    ] = "",
    k: Annotated[
        str,
        typer.Option(
            "--k",
            help="retrieval depths, comma-separated [default: the config's evaluation.k; with "
            "--retrievals: the most items on any line]",
        ),
    ] = "",
    json_out: Annotated[
        Path | None, typer.Option("--json", help="also write the results to this JSON file")
    ] = None,
    config: Annotated[
        Path | None, typer.Option("--config", help="run configuration (models, bootstrap)")
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="evaluate a benchmark that did not pass the gate")
    ] = False,
    aggregate: Annotated[
        str | None,
        typer.Option(
            "--aggregate",
            help="questions (mean over all questions) or personas (mean of persona means, as the "
            "paper); default: the config's [evaluation] aggregate",
        ),
    ] = None,
    exclude_no_evidence: Annotated[
        bool | None,
        typer.Option(
            "--exclude-no-evidence/--include-no-evidence",
            help="leave questions without evidence out of recall (as the paper) or score them 0; "
            "default: the config's",
        ),
    ] = None,
    retrievals: Annotated[
        Path | None,
        typer.Option(
            "--retrievals",
            help="score a system run elsewhere: a results file (JSONL, one line per question; "
            "see the README)",
        ),
    ] = None,
    predictions: Annotated[
        Path | None,
        typer.Option(
            "--predictions",
            help="score another harness's predictions, in a benchmark's own layout (--format), by "
            "the benchmark's standard protocols (see the README)",
        ),
    ] = None,
    fmt: Annotated[
        str | None,
        typer.Option(
            "--format",
            help="with --predictions: longmemeval (JSONL of question_id, hypothesis), locomo "
            "(the LoCoMo layout, prediction under --key) or jsonl (the results-file format)",
        ),
    ] = None,
    key: Annotated[
        str | None,
        typer.Option(
            "--key",
            help="with --format locomo: the qa items' prediction field (e.g. gpt-4_prediction)",
        ),
    ] = None,
    name: Annotated[
        str | None,
        typer.Option(
            "--name",
            help="with --retrievals or --predictions: the name its results are stored under",
        ),
    ] = None,
    allow_missing: Annotated[
        bool,
        typer.Option(
            "--allow-missing",
            help="with --retrievals: score questions without a line as retrieving nothing; with "
            "--predictions: leave questions without a prediction unscored",
        ),
    ] = False,
    replace: Annotated[
        bool,
        typer.Option(
            "--replace",
            help="with --retrievals: store the file's results under a --name that already holds "
            "another file's on the benchmark (as its latest evaluation)",
        ),
    ] = False,
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit",
            min=1,
            help="a quick run: the first N questions (never ranked with full runs)",
        ),
    ] = None,
    sample: Annotated[
        int | None,
        typer.Option(
            "--sample", min=1, help="a quick run: N questions drawn by question type (with --seed)"
        ),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="the --sample draw's seed")] = 0,
) -> None:
    """Score memory systems (or a results file) on a benchmark; metrics to the warehouse (and --json)."""
    from clonemem.schemas.config import load_config

    cfg = with_aggregation(load_config(config), aggregate, exclude_no_evidence)
    if limit is not None and sample is not None:
        usage("--limit and --sample exclude each other: give one")
    files = (retrievals, name, predictions, fmt, key)
    if (limit is not None or sample is not None) and (
        any(f is not None for f in files) or allow_missing
    ):
        usage(
            "--limit and --sample choose questions to ask; a results file answers those it has lines for"
        )
    if predictions is not None or fmt is not None or key is not None:
        if retrievals is not None:
            usage("--retrievals and --predictions exclude each other: score one file per run")
        return evaluate_predictions(
            benchmark,
            predictions,
            fmt,
            key,
            name,
            systems,
            k,
            json_out,
            cfg,
            force,
            allow_missing,
            replace,
        )
    if retrievals is not None or name is not None or allow_missing or replace:
        return evaluate_results_file(
            benchmark, retrievals, name, systems, k, json_out, cfg, force, allow_missing, replace
        )
    names = system_names(systems) if systems else list(cfg.evaluation.systems)
    depths = ks(k) if k else sorted(set(cfg.evaluation.k))
    precheck(benchmark, names, force, cfg)
    from clonemem.prefect_env import on_early_server, start_server_early

    start_server_early()  # Prefect's server starts while the flow's modules load (see prefect_env)
    from clonemem.flows.evaluation import evaluate_flow
    from clonemem.progress import shown

    # failures map to exit codes in handles_errors: 5 only for MemorySystemFailed, 6 at the budget
    with writing(State.warehouse), shown(), on_early_server():
        result = evaluate_flow(
            str(State.warehouse.expanduser().resolve()),
            benchmark,
            names,
            depths,
            force,
            cfg,
            limit=limit,
            sample=sample,
            sample_seed=seed,
        )
    render.evaluation(result)
    if json_out is not None:
        write_json(json_out, result)


def evaluate_results_file(
    benchmark: str,
    path: Path | None,
    name: str | None,
    systems: str,
    k: str,
    json_out: Path | None,
    cfg: RunConfig,
    force: bool,
    allow_missing: bool,
    replace: bool = False,
) -> None:
    """`evaluate --retrievals FILE --name NAME`: the file is checked whole before anything runs; a
    bad file is bad input (exit 1, nothing stored), not a failed system: no system of ours ran. A
    name that holds another file's results on the benchmark needs ``--replace`` (exit 2 without)."""
    from clonemem.evaluation.results_file import read_and_resolve
    from clonemem.memory import SYSTEMS

    if name is not None:
        name = checked_name(name, "--name")
    if path is None or name is None:
        usage(
            "--retrievals FILE and --name NAME go together (--allow-missing and --replace need "
            "them too)"
        )
    if systems:
        usage(
            "--systems and --retrievals exclude each other: score a results file in a run of its own"
        )
    if name in SYSTEMS.names():
        usage(f"--name {name!r} is a registered memory system: name the file's system otherwise")
    scored = score_file(
        benchmark,
        path,
        name,
        ks(k) if k else None,
        force,
        cfg,
        allow_missing,
        replace,
        lambda wh, bid: read_and_resolve(wh, bid, path, allow_missing),
    )
    missing = (
        f"; {scored.missing} questions without a line scored as retrieving nothing"
        if scored.missing
        else ""
    )
    render.err(
        f"results file {scored.file} (sha256 {scored.sha256}) scored as {name!r} at k="
        f"{','.join(map(str, scored.ks))}: {scored.lines} lines{missing}"
    )
    render.evaluation(scored.evaluation)
    if json_out is not None:
        write_json(json_out, scored.evaluation)


def evaluate_predictions(
    benchmark: str,
    path: Path | None,
    fmt: str | None,
    key: str | None,
    name: str | None,
    systems: str,
    k: str,
    json_out: Path | None,
    cfg: RunConfig,
    force: bool,
    allow_missing: bool,
    replace: bool = False,
) -> None:
    """`evaluate --predictions FILE --format F --name NAME`: read and mapped whole before anything
    runs; a bad file is one line naming file, line and field (exit 1, nothing stored)."""
    from clonemem.evaluation.predictions import FORMATS, read_predictions
    from clonemem.memory import SYSTEMS

    if name is not None:
        name = checked_name(name, "--name")
    if path is None or not fmt or name is None:
        usage("--predictions FILE, --format FORMAT and --name NAME go together")
    if fmt not in FORMATS:
        usage(f"--format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if fmt == "locomo" and not key:
        usage("--format locomo needs --key, the qa items' prediction field (e.g. gpt-4_prediction)")
    if systems:
        usage(
            "--systems and --predictions exclude each other: score a predictions file in a run "
            "of its own"
        )
    if name in SYSTEMS.names():
        usage(f"--name {name!r} is a registered memory system: name the file's system otherwise")
    scored = score_file(
        benchmark,
        path,
        name,
        ks(k) if k else None,
        force,
        cfg,
        allow_missing,
        replace,
        lambda wh, bid: read_predictions(wh, bid, path, fmt, key, allow_missing),
        fmt,
        key,
    )
    missing = (
        f"; {scored.missing} questions without a prediction left unscored" if scored.missing else ""
    )
    render.err(
        f"predictions file {scored.file} ({fmt}, sha256 {scored.sha256}) scored as {name!r}: "
        f"{scored.lines} predictions{missing}"
    )
    render.evaluation(scored.evaluation)
    if json_out is not None:
        write_json(json_out, scored.evaluation)


def score_file(
    benchmark: str,
    path: Path,
    name: str,
    depths: list[int] | None,
    force: bool,
    cfg: RunConfig,
    allow_missing: bool,
    replace: bool,
    read: Callable[[Warehouse, str], ResolvedFile],
    fmt: str | None = None,
    key: str | None = None,
) -> ResultsFileScored:
    """A file made elsewhere (a results file, or predictions in a benchmark's layout), read whole by
    ``read`` and checked before the flow runs: a bad file is exit 1, a name holding other results
    exit 2, nothing stored either way."""
    from clonemem.evaluation.names import NameTaken, refuse_reuse
    from clonemem.evaluation.results_file import ResultsFileError, file_ks
    from clonemem.flows.results_file import evaluate_results_file_flow
    from clonemem.progress import shown
    from clonemem.warehouse import Warehouse
    from clonemem.warehouse.catalog import require_gate_passed

    try:
        with Warehouse.open_reader(State.warehouse) as wh:
            bid, bname = require_gate_passed(wh, benchmark, force)
            resolved = read(wh, bid)
            file_ks(resolved, depths)
            refuse_reuse(wh, bid, bname, name, resolved.provenance, "--name", replace)
        with writing(State.warehouse), shown():
            return evaluate_results_file_flow(
                str(State.warehouse.expanduser().resolve()),
                benchmark,
                str(path),
                name,
                depths,
                force,
                cfg,
                allow_missing,
                replace=replace,
                predictions_format=fmt,
                key=key,
            )
    except ResultsFileError as exc:
        fail(f"{exc}; nothing was stored")
    except NameTaken as exc:
        usage(f"{exc}; nothing was stored")


def precheck(benchmark: str, names: list[str], force: bool, cfg: RunConfig) -> None:
    """Fail before the flow starts (the flow checks again, for deployments): a remote system labelled
    with a registered system's name (usage, exit 2, before any network contact), unknown systems, remote
    ones that do not answer ``/v1/info`` (exit 5), an ungated benchmark."""
    from clonemem.memory import SYSTEMS
    from clonemem.memory.errors import MemorySystemFailed
    from clonemem.memory.remote import (
        LabelTaken,
        options_of,
        refuse_registered_labels,
        resolve_systems,
    )
    from clonemem.warehouse import Warehouse
    from clonemem.warehouse.catalog import require_gate_passed

    try:
        refuse_registered_labels(names, cfg.evaluation.remote)
        resolved = resolve_systems(names, cfg.evaluation.remote, options_of(cfg.evaluation))
    except LabelTaken as exc:
        fail(str(exc), ExitCode.USAGE)
    except MemorySystemFailed as exc:
        fail(f"{exc}; nothing was stored", ExitCode.SYSTEMS_FAILED)
    for system, remote in resolved:
        if remote is None:
            SYSTEMS.get(system)
        else:
            remote.pool.close()  # asked /v1/info only: the flow resolves it again
    with Warehouse.open_reader(State.warehouse) as wh:
        require_gate_passed(wh, benchmark, force)


@app.command("export-retrievals")
@handles_errors
def export_retrievals(
    eval_run: Annotated[
        str,
        typer.Argument(help="evaluation run id, or a benchmark id or name (its latest evaluation)"),
    ],
    out: Annotated[Path, typer.Option("--out", help="results file to write (JSONL)")],
    system: Annotated[
        str | None,
        typer.Option("--system", help="which system (required when the run scored several)"),
    ] = None,
    k: Annotated[
        int | None,
        typer.Option("--k", min=1, help="which k (required when the run scored several)"),
    ] = None,
) -> None:
    """Write one system's retrievals, choices and answers of a stored evaluation as a results file."""
    from clonemem.evaluation.results_file import ResultsFileError
    from clonemem.evaluation.results_file import export_retrievals as export
    from clonemem.warehouse import Warehouse

    try:
        with Warehouse.open_reader(State.warehouse) as wh:
            got = export(wh, eval_run, out, system, k)
    except ResultsFileError as exc:
        fail(str(exc))
    render.err(f"{got.lines} lines: {got.system} at k={got.k} of evaluation run {got.eval_run_id}")
    typer.echo(str(got.path))


@app.command("systems")
def systems_cmd(
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """List the registered memory systems (the names `evaluate --systems` accepts)."""
    from clonemem.memory import SYSTEMS

    names = SYSTEMS.names()
    typer.echo(json.dumps(names) if as_json else "\n".join(names))
