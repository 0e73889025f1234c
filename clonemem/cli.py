"""The `clonemem` command line. Commands parse arguments, call one service, print."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from pathlib import Path
from typing import Annotated, Any

import typer

from clonemem import settings
from clonemem.allocator import tune as _tune_allocators
from clonemem.errors import ExitCode
from clonemem.prefect_env import configure as _configure_prefect

# before Prefect is imported: it reads its settings (and sets up logging) at import time
_configure_prefect(debug="--debug" in sys.argv[1:])
_tune_allocators()  # before any thread starts and before DuckDB or polars loads (clonemem/allocator.py)

app = typer.Typer(
    name="clonemem",
    help="CloneMem benchmark pipeline: generate, gate and evaluate long-term-memory benchmarks for AI clones.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

DEFAULT_WAREHOUSE = "clonemem.duckdb"


class State:
    warehouse: Path = Path(DEFAULT_WAREHOUSE)
    explicit: bool = False  # --warehouse or $CLONEMEM_WAREHOUSE given: it beats a config's `warehouse`
    debug: bool = False
    wait: float | None = None  # --wait: seconds a writer waits for another writer (None: the default)
    command: str | None = None  # "clonemem generate": what the writer lock's file calls this process


def fail(message: str, code: int = ExitCode.ERROR) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(int(code))


def handles_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn errors into one clear line and a non-zero exit; `--debug` keeps the traceback.

    The project's own errors carry the whole story; anything else is unexpected and says how to get
    the traceback.
    """

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from clonemem import interrupts
        from clonemem.errors import exit_code_for, one_line, significant, unreachable_prefect_api, user_errors

        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort, KeyboardInterrupt):
            raise
        except Exception as exc:
            if interrupts.received():  # whatever Ctrl-C broke on its way out (a query, a connection)
                raise KeyboardInterrupt from exc
            if State.debug:
                raise
            import duckdb

            from clonemem.memory.errors import MemorySystemFailed

            if isinstance(exc, duckdb.Error):
                fail(one_line(exc))
            url = unreachable_prefect_api(exc)
            if url is not None:
                fail(f"cannot reach the Prefect API at {url}: start that Prefect server, or unset "
                     "PREFECT_API_URL to run on a temporary local one")
            exc = significant(exc)  # Prefect may re-raise a task's error wrapped
            if isinstance(exc, MemorySystemFailed):
                fail(f"{exc}; nothing was stored: fix the system, or leave it out of --systems, and run again",
                     ExitCode.SYSTEMS_FAILED)
            if isinstance(exc, user_errors()) or exit_code_for(exc) != ExitCode.ERROR:
                fail(str(exc), exit_code_for(exc))  # the project's messages: one line per problem
            fail(f"{type(exc).__name__}: {one_line(exc)} (unexpected; re-run with --debug for the traceback)")

    return wrapper


@contextmanager
def writing(warehouse: Path, *, runs_flows: bool = True) -> Iterator[None]:
    """Hold the warehouse's writer lock for a whole command (the stages it runs join this hold).

    Every command that writes runs flows, so this is also where the ephemeral Prefect server is
    tied to this process's life."""
    from clonemem import interrupts
    from clonemem.prefect_env import die_with_parent_server
    from clonemem.warehouse.lock import writer_lock

    interrupts.note_writes()
    if runs_flows:
        die_with_parent_server()
    with writer_lock(warehouse.expanduser().resolve(), wait_s=State.wait, command=State.command):
        yield


@app.callback()
def main_options(
    ctx: typer.Context,
    warehouse: Annotated[
        Path | None,
        typer.Option("--warehouse", envvar=settings.WAREHOUSE, help="DuckDB warehouse file [default: ./clonemem.duckdb]"),
    ] = None,
    debug: Annotated[bool, typer.Option("--debug", help="show tracebacks and Prefect's logs")] = False,
    wait: Annotated[
        float | None,
        typer.Option("--wait", envvar=settings.LOCK_WAIT, min=0,
                     help="seconds a write waits while another process writes the warehouse [default: 600]"),
    ] = None,
) -> None:
    State.warehouse = warehouse or Path(DEFAULT_WAREHOUSE)
    State.explicit = warehouse is not None
    State.debug = debug
    State.wait = wait
    State.command = f"clonemem {ctx.invoked_subcommand}" if ctx.invoked_subcommand else None


def _warehouse_for(config: Any) -> Path:
    if State.explicit or config.warehouse is None:
        return State.warehouse
    return config.warehouse


# -- imports and export ------------------------------------------------------------------------


@app.command("import")
@handles_errors
def import_cmd(
    format_name: Annotated[str, typer.Argument(metavar="FORMAT", help="source format: release, locomo, or one a plugin registers (clonemem.importers)")],
    paths: Annotated[list[Path], typer.Argument(help="files or folders (every file of the format, recursively)")],
    name: Annotated[str, typer.Option("--name", help="benchmark name")],
    replace: Annotated[bool, typer.Option("--replace", help="replace an existing benchmark of that name (atomically)")] = False,
    append: Annotated[bool, typer.Option("--append", help="add these personas to an existing benchmark")] = False,
) -> None:
    """Load files of a registered format as a benchmark (all files or nothing), through the import flow."""
    _import(format_name, paths, name, replace, append)


@app.command("import-release")
@handles_errors
def import_release(
    paths: Annotated[list[Path], typer.Argument(help="CloneMem release JSON files or folders (every *.json, recursively)")],
    name: Annotated[str, typer.Option("--name", help="benchmark name")],
    replace: Annotated[bool, typer.Option("--replace", help="replace an existing benchmark of that name (atomically)")] = False,
    append: Annotated[bool, typer.Option("--append", help="add these personas to an existing benchmark")] = False,
) -> None:
    """Load CloneMem release files as a benchmark (all files or nothing); `import release` by its earlier name."""
    _import("release", paths, name, replace, append)


@app.command("import-locomo")
@handles_errors
def import_locomo(
    paths: Annotated[list[Path], typer.Argument(help="LoCoMo files (one conversation each, or locomo10.json) or folders")],
    name: Annotated[str, typer.Option("--name", help="benchmark name")],
    replace: Annotated[bool, typer.Option("--replace", help="replace an existing benchmark of that name (atomically)")] = False,
    append: Annotated[bool, typer.Option("--append", help="add these conversations to an existing benchmark")] = False,
) -> None:
    """Load LoCoMo conversations as a benchmark: one persona per conversation, one trace per turn; `import locomo`."""
    _import("locomo", paths, name, replace, append)


def _import(format_name: str, paths: list[Path], name: str, replace: bool, append: bool) -> None:
    """Every import command: check the request, then run the import flow (the deployment's path too).

    The writer lock is not held around the flow: files are parsed before the warehouse is touched, so a
    bad file leaves no warehouse (nor lock file) behind; the landing task waits for the lock itself."""
    from clonemem.importers import importer

    if not name.strip():
        fail("--name must not be empty or blank", code=ExitCode.USAGE)
    mode = _import_mode(replace, append)
    importer(format_name)  # an unknown format fails here, before Prefect starts
    from clonemem.flows.imports import import_flow
    from clonemem.prefect_env import die_with_parent_server

    die_with_parent_server()
    warehouse = State.warehouse.expanduser().resolve()
    with _prefect_quiet():
        summary = import_flow(format_name, [str(p) for p in paths], name, str(warehouse), mode, State.wait)
    _print_import(summary, State.warehouse)


@contextmanager
def _prefect_quiet() -> Iterator[None]:
    """No log records while the import flow runs (unless --debug): a refused import is the task's failure,
    which Prefect logs with its traceback, and the CLI reports it itself, in one line."""
    import logging

    if State.debug:
        yield
        return
    before = logging.root.manager.disable
    logging.disable(logging.ERROR)
    try:
        yield
    finally:
        logging.disable(before)


def _import_mode(replace: bool, append: bool) -> str:
    if replace and append:
        fail("--replace and --append exclude each other", code=2)
    return "replace" if replace else "append" if append else "create"


def _print_import(summary: Any, warehouse: Path) -> None:
    verb = {"created": "imported", "replaced": "replaced", "appended": "appended to"}[summary.mode]
    typer.echo(f"{verb} benchmark {summary.name!r} ({summary.benchmark_id}) in {warehouse}")
    typer.echo(f"  this import: personas {summary.personas}, traces {summary.traces}, questions {summary.questions} "
               f"({summary.free_text_only} free-text only); languages "
               + ", ".join(f"{k} ×{v}" for k, v in summary.languages.items()))
    if summary.mode == "appended":
        typer.echo(f"  benchmark now: personas {summary.total_personas}, traces {summary.total_traces}, "
                   f"questions {summary.total_questions}")
    if summary.relabelled:
        kinds = ", ".join(f"{k} ×{v}" for k, v in summary.relabelled.items())
        typer.echo(f"  question types mapped to the project's (source label kept in source_question_type): {kinds}")
    if summary.unknown_question_types:
        kinds = ", ".join(f"{k} ×{v}" for k, v in sorted(summary.unknown_question_types.items()))
        typer.echo(f"  question types outside the eight, kept and flagged: {kinds}")
    if summary.evidence_without_traces:
        typer.echo(f"  evidence items naming no trace (skipped by recall metrics): {summary.evidence_without_traces}")
    if summary.questions_without_evidence:
        typer.echo(f"  questions naming no evidence (score 0 on recall): {summary.questions_without_evidence}")
    if summary.notes:
        counts = ", ".join(f"{k} ×{v}" for k, v in summary.note_counts.items())
        typer.echo(f"  evidence references repaired or unresolved (see table import_notes): {counts}")
        for note in summary.notes[:10]:
            typer.echo(f"    {note}")
        if len(summary.notes) > 10:
            typer.echo(f"    ... and {len(summary.notes) - 10} more")


@app.command("export-release")
@handles_errors
def export_release(
    benchmark: Annotated[str, typer.Argument(help="benchmark id or name")],
    out: Annotated[Path, typer.Option("--out", help="output folder")],
    questions_key: Annotated[str, typer.Option(
        "--questions-key", help="top-level key of the question list: questions (documented) or qa_items (as published)",
    )] = "questions",
) -> None:
    """Write a benchmark in the CloneMem release format, one JSON file per persona."""
    from clonemem.exporters.release import export_release as export
    from clonemem.schemas.release import QUESTION_KEYS
    from clonemem.warehouse import Warehouse

    if questions_key not in QUESTION_KEYS:
        fail(f"--questions-key must be one of {', '.join(QUESTION_KEYS)}, got {questions_key!r}", code=2)
    with Warehouse.open_reader(State.warehouse) as wh:
        written = export(wh, benchmark, out, questions_key)
    for path in written:
        typer.echo(str(path))


# -- generation --------------------------------------------------------------------------------


@app.command("generate")
@handles_errors
def generate(
    config: Annotated[Path, typer.Option("--config", help="run configuration (TOML)")],
    persona: Annotated[int | None, typer.Option("--persona", help="generate only this persona index (scale-out)")] = None,
    bundle: Annotated[str | None, typer.Option("--bundle", help="with --persona: write the persona here instead of landing (a path or any fsspec URL)")] = None,
    allow_empty_config: Annotated[bool, typer.Option("--allow-empty-config", help="accept a config file with no settings (all defaults)")] = False,
    estimate: Annotated[bool, typer.Option("--estimate", help="price the run (an offline dry run); call no API")] = False,
    max_cost: Annotated[float | None, typer.Option("--max-cost", min=0.0, help="stop before new spend would exceed this many USD")] = None,
) -> None:
    """Run generation stages I–IV and the gate; prints the benchmark id (exit codes: see the README)."""
    cfg = _config_for_run(config, max_cost, allow_empty_config, check_keys=not estimate)
    if estimate:
        return _print_estimate(cfg)
    if (persona is None) != (bundle is None):
        fail("--persona and --bundle go together", code=2)
    if persona is not None and bundle is not None:
        from clonemem import interrupts
        from clonemem.flows.generation import generate_persona_flow
        from clonemem.prefect_env import die_with_parent_server

        interrupts.note_writes()  # the bundle, and the task cache
        die_with_parent_server()
        out = generate_persona_flow(persona, str(bundle), cfg)
        typer.echo(f"persona {persona} written to {bundle} ({out.failures} failed items)", err=True)
        return
    result = _run_pipeline(cfg, evaluate=False, export_dir=None)  # generation only: no release export
    typer.echo(result.benchmark_id)


@app.command("run")
@handles_errors
def run(
    config: Annotated[Path, typer.Option("--config", help="run configuration (TOML)")],
    systems: Annotated[str, typer.Option("--systems", help="comma-separated; default: the config's evaluation.systems")] = "",
    k: Annotated[str, typer.Option("--k", help="retrieval depths, comma-separated; default: the config's")] = "",
    out: Annotated[Path | None, typer.Option("--out", help="export the benchmark in the release format here")] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="also write the evaluation results to this JSON file")] = None,
    force: Annotated[bool, typer.Option("--force", help="evaluate even when the gate fails")] = False,
    estimate: Annotated[bool, typer.Option("--estimate", help="price the run (an offline dry run); call no API")] = False,
    max_cost: Annotated[float | None, typer.Option("--max-cost", min=0.0, help="stop before new spend would exceed this many USD")] = None,
) -> None:
    """The whole pipeline (the `pipeline` flow): generate → QA → gate → evaluate → export."""
    cfg = _config_for_run(config, max_cost, check_keys=not estimate)
    if estimate:
        return _print_estimate(cfg)
    names = _csv(systems, "--systems") if systems else None
    ks = _ks(k) if k else None
    result = _run_pipeline(cfg, evaluate=True, systems=names, ks=ks, force=force, export_dir=out)
    assert result.evaluation is not None
    typer.echo(leaderboard(result.evaluation))
    if json_out is not None:
        _write_json(json_out, result.evaluation)
    if result.export is not None:
        typer.echo(f"exported to {result.export.folder}", err=True)


def _config_for_run(path: Path, max_cost: float | None, allow_empty: bool = False, check_keys: bool = True) -> Any:
    from clonemem.schemas.config import load_config

    cfg = load_config(path, allow_empty=allow_empty, check_keys=check_keys)
    if max_cost is not None:
        if max_cost <= 0:
            fail("--max-cost must be more than 0", code=ExitCode.USAGE)
        cfg = cfg.model_copy(update={"max_cost_usd": max_cost})
    return cfg


def _print_estimate(cfg: Any) -> None:
    """The dry run's table: calls, tokens and cost per stage and role, and the total."""
    from clonemem.cost import estimate
    from clonemem.prefect_env import die_with_parent_server

    die_with_parent_server()
    got = estimate(cfg)
    typer.echo(got.table())
    if cfg.max_cost_usd is not None and got.total_usd > cfg.max_cost_usd:
        typer.echo(f"note: the estimate (${got.total_usd:.4f}) is over --max-cost ${cfg.max_cost_usd:.4f}; the run "
                   "would stop there (resumable)", err=True)


def _run_pipeline(cfg: Any, **options: Any) -> Any:
    """Run the `pipeline` flow holding the warehouse, printing each part's summary; map failures to exit codes."""
    from clonemem.expectations.gate import GateFailed
    from clonemem.flows.pipeline import NothingGenerated, pipeline_flow
    from clonemem.progress import shown

    warehouse = _warehouse_for(cfg).expanduser().resolve()
    with writing(warehouse), shown():
        try:
            result = pipeline_flow(str(warehouse), cfg, **{k: (str(v) if isinstance(v, Path) else v)
                                                          for k, v in options.items()})
        except NothingGenerated as exc:
            if exc.generation is not None:
                _print_generation(exc.generation, warehouse)
            fail(str(exc), ExitCode.NOTHING_GENERATED)
        except GateFailed as exc:
            if exc.pipeline is not None:
                _print_generation(exc.pipeline.generation, warehouse)
                _print_qa(exc.pipeline.qa)
            _print_gate(exc.result)
            fail(f"benchmark {cfg.name!r} was stored but failed the gate (see the failed expectations above): fix "
                 f"the config and generate again, or evaluate it anyway with `clonemem evaluate {cfg.name} --force`",
                 ExitCode.GATE_FAILED)
    _print_generation(result.generation, warehouse)
    _print_qa(result.qa)
    if not (result.generation.landed or result.qa.landed) and result.gate_status == "passed":
        typer.echo(f"gate: content unchanged since the last gate run; status {result.gate_status}", err=True)
    else:
        typer.echo(f"gate {result.gate_status}" + (f" (forced past: {'; '.join(result.gate_failed)})"
                                                   if result.gate_failed else ""), err=True)
    return result


def _print_qa(q: Any) -> None:
    typer.echo(f"stage IV: {q.status.get('accepted', 0)} questions accepted, {q.status.get('rejected', 0)} rejected "
               f"({q.rejection_rate}), {q.status.get('infeasible', 0)} candidates infeasible; by type "
               f"{q.by_type}; by dimension {q.by_dimension}; {q.llm_calls} LLM calls", err=True)
    cues = q.cues
    typer.echo(f"  superficial cues: longest option right {cues.longest_option_accuracy}, "
               f"word overlap right {cues.overlap_option_accuracy} (chance 0.25); correct letters "
               f"{cues.correct_letter_distribution}", err=True)


def _print_gate(g: Any) -> None:
    failed = g.failed
    typer.echo(f"gate {g.status}: {len(g.outcomes) - len(failed)}/{len(g.outcomes)} expectations met; "
               f"data docs: {g.data_docs}", err=True)
    for o in failed:
        typer.echo(f"  FAILED {o.suite}: {o.expectation} (unexpected: {o.unexpected_count}, "
                   f"observed: {json.dumps(o.observed, default=str)[:200]})", err=True)
        for row in o.failing_sample[:3]:
            typer.echo(f"    e.g. {json.dumps(row, default=str)[:300]}", err=True)


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
            _print_gate(exc.result)
            fail(f"benchmark {benchmark!r} failed the gate (see above); `clonemem evaluate` refuses it unless --force",
                 ExitCode.GATE_FAILED)
    _print_gate(result)


def _print_generation(s: Any, warehouse: Path) -> None:
    err = lambda msg: typer.echo(msg, err=True)  # noqa: E731
    err(f"benchmark {s.name!r} in {warehouse}: {s.personas} persona(s), {s.landed} landed, "
        f"{s.unchanged} unchanged; {s.detailed_events} detailed events, {s.evidence} evidence, "
        f"{s.traces} traces; {s.llm_calls} LLM calls in {s.seconds:.1f} s")
    if s.failures:
        err(f"{len(s.failures)} stage item(s) failed after retries:")
        for f in s.failures[:20]:
            err(f"  {f.persona} {f.stage} {f.item}: {f.error}")
    for d in s.dropped[:20]:
        err(f"  dropped {d}")


@app.command("land")
@handles_errors
def land_bundles(bundles: Annotated[list[str], typer.Argument(help="persona bundles from `generate --persona` (paths or fsspec URLs)")]) -> None:
    """Land persona bundles generated elsewhere into this warehouse (one writer, many generators)."""
    from clonemem.generation.land import land_bundle_files
    from clonemem.warehouse import Warehouse

    with writing(State.warehouse, runs_flows=False), Warehouse.open_writer(State.warehouse, wait_s=State.wait) as wh:
        for path, changed in land_bundle_files(wh, bundles):
            typer.echo(f"{path}: {'landed' if changed else 'unchanged'}")


# -- evaluation --------------------------------------------------------------------------------


def _csv(value: str, what: str) -> list[str]:
    items = [v.strip() for v in value.split(",") if v.strip()]
    if not items:
        fail(f"{what} must not be empty", code=2)
    return items


def _ks(value: str) -> list[int]:
    try:
        ks = sorted({int(x) for x in _csv(value, "--k")})
    except ValueError:
        fail(f"--k must be comma-separated integers, got {value!r}", code=2)
    if any(x < 1 for x in ks):
        fail("--k values must be at least 1", code=2)
    return ks


def _write_json(path: Path, result: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result.model_dump(mode="json"), indent=1), "utf-8")
    typer.echo(f"results written to {path}", err=True)


@app.command("evaluate")
@handles_errors
def evaluate(
    benchmark: Annotated[str, typer.Argument(help="benchmark id or name")],
    systems: Annotated[str, typer.Option(
        "--systems", help="comma-separated: names (see `clonemem systems`), memory-protocol URLs, NAME=URL")] = "",
    k: Annotated[str, typer.Option("--k", help="retrieval depths, comma-separated [default: the config's evaluation.k; "
                                               "with --retrievals: the most items on any line]")] = "",
    json_out: Annotated[Path | None, typer.Option("--json", help="also write the results to this JSON file")] = None,
    config: Annotated[Path | None, typer.Option("--config", help="run configuration (models, bootstrap)")] = None,
    force: Annotated[bool, typer.Option("--force", help="evaluate a benchmark that did not pass the gate")] = False,
    aggregate: Annotated[str | None, typer.Option(
        "--aggregate", help="questions (mean over all questions) or personas (mean of persona means, as the "
                            "paper); default: the config's [evaluation] aggregate")] = None,
    exclude_no_evidence: Annotated[bool | None, typer.Option(
        "--exclude-no-evidence/--include-no-evidence",
        help="leave questions without evidence out of recall (as the paper) or score them 0; default: the config's")] = None,
    retrievals: Annotated[Path | None, typer.Option(
        "--retrievals", help="score a system run elsewhere: a results file (JSONL, one line per question; see the README)",
    )] = None,
    name: Annotated[str | None, typer.Option("--name", help="with --retrievals: the name its results are stored under")] = None,
    allow_missing: Annotated[bool, typer.Option(
        "--allow-missing", help="with --retrievals: score questions without a line as retrieving nothing")] = False,
) -> None:
    """Score memory systems (or a results file) on a benchmark; write metrics to the warehouse (and --json)."""
    from clonemem.schemas.config import load_config

    cfg = _with_aggregation(load_config(config), aggregate, exclude_no_evidence)
    if retrievals is not None or name is not None or allow_missing:
        return _evaluate_results_file(benchmark, retrievals, name, systems, k, json_out, cfg, force, allow_missing)
    names = _csv(systems, "--systems") if systems else list(cfg.evaluation.systems)
    ks = _ks(k) if k else sorted(set(cfg.evaluation.k))
    _precheck_evaluation(benchmark, names, force, cfg)
    from clonemem.prefect_env import on_early_server, start_server_early

    start_server_early()  # Prefect's server starts while the flow's modules load (see prefect_env)
    from clonemem.flows.evaluation import evaluate_flow
    from clonemem.progress import shown

    # failures map to exit codes in handles_errors: 5 only for MemorySystemFailed, 6 at the budget
    with writing(State.warehouse), shown(), on_early_server():
        result = evaluate_flow(str(State.warehouse.expanduser().resolve()), benchmark, names, ks, force, cfg)
    _say_if_reused(result)
    typer.echo(leaderboard(result))
    if json_out is not None:
        _write_json(json_out, result)


def _with_aggregation(cfg: Any, aggregate: str | None, exclude_no_evidence: bool | None) -> Any:
    """The config with the command line's aggregation options over its [evaluation] ones."""
    if aggregate is not None and aggregate not in ("questions", "personas"):
        fail(f"--aggregate must be 'questions' or 'personas', got {aggregate!r}", code=2)
    update = {k: v for k, v in (("aggregate", aggregate), ("exclude_no_evidence", exclude_no_evidence)) if v is not None}
    if not update:
        return cfg
    return cfg.model_copy(update={"evaluation": cfg.evaluation.model_copy(update=update)})


def _evaluate_results_file(benchmark: str, path: Path | None, name: str | None, systems: str, k: str,
                           json_out: Path | None, cfg: Any, force: bool, allow_missing: bool) -> None:
    """`evaluate --retrievals FILE --name NAME`: the file is checked whole before anything runs; a bad file
    is bad input (exit 1, nothing stored), not a failed system: no system of ours ran."""
    from clonemem.evaluation.results_file import ResultsFileError, file_ks, read_and_resolve
    from clonemem.flows.results_file import evaluate_results_file_flow
    from clonemem.memory import SYSTEMS
    from clonemem.progress import shown
    from clonemem.warehouse import Warehouse
    from clonemem.warehouse.catalog import require_gate_passed

    if path is None or not name:
        fail("--retrievals FILE and --name NAME go together (--allow-missing needs them too)", code=ExitCode.USAGE)
    if systems:
        fail("--systems and --retrievals exclude each other: score a results file in a run of its own",
             code=ExitCode.USAGE)
    if name in SYSTEMS.names():
        fail(f"--name {name!r} is a registered memory system: name the file's system otherwise", code=ExitCode.USAGE)
    ks = _ks(k) if k else None
    try:
        with Warehouse.open_reader(State.warehouse) as wh:
            bid, _ = require_gate_passed(wh, benchmark, force)
            file_ks(read_and_resolve(wh, bid, path, allow_missing), ks)
        with writing(State.warehouse), shown():
            scored = evaluate_results_file_flow(str(State.warehouse.expanduser().resolve()), benchmark, str(path), name,
                                                ks, force, cfg, allow_missing)
    except ResultsFileError as exc:
        fail(f"{exc}; nothing was stored")
    typer.echo(f"results file {scored.file} (sha256 {scored.sha256}) scored as {name!r} at k="
               f"{','.join(map(str, scored.ks))}: {scored.lines} lines"
               + (f"; {scored.missing} questions without a line scored as retrieving nothing" if scored.missing else ""),
               err=True)
    _say_if_reused(scored.evaluation)
    typer.echo(leaderboard(scored.evaluation))
    if json_out is not None:
        _write_json(json_out, scored.evaluation)


@app.command("export-retrievals")
@handles_errors
def export_retrievals(
    eval_run: Annotated[str, typer.Argument(help="evaluation run id, or a benchmark id or name (its latest evaluation)")],
    out: Annotated[Path, typer.Option("--out", help="results file to write (JSONL)")],
    system: Annotated[str | None, typer.Option("--system", help="which system (required when the run scored several)")] = None,
    k: Annotated[int | None, typer.Option("--k", min=1, help="which k (required when the run scored several)")] = None,
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
    typer.echo(f"{got.lines} lines: {got.system} at k={got.k} of evaluation run {got.eval_run_id}", err=True)
    typer.echo(str(got.path))


def _precheck_evaluation(benchmark: str, names: list[str], force: bool, cfg: Any) -> None:
    """Fail before the flow starts (the flow checks again, for deployments): unknown systems, remote ones
    that do not answer ``/v1/info`` (exit 5), an ungated benchmark."""
    from clonemem.memory import SYSTEMS
    from clonemem.memory.errors import MemorySystemFailed
    from clonemem.memory.remote import options_of, resolve_systems
    from clonemem.warehouse import Warehouse
    from clonemem.warehouse.catalog import require_gate_passed

    try:
        resolved = resolve_systems(names, cfg.evaluation.remote, options_of(cfg.evaluation))
    except MemorySystemFailed as exc:
        fail(f"{exc}; nothing was stored", ExitCode.SYSTEMS_FAILED)
    for name, remote in resolved:
        if remote is None:
            SYSTEMS.get(name)
    with Warehouse.open_reader(State.warehouse) as wh:
        require_gate_passed(wh, benchmark, force)


def _say_if_reused(result: Any) -> None:
    if result.reused:
        typer.echo(f"evaluation identical to the latest stored one of {result.benchmark!r} ({result.eval_run_id}: same "
                   "benchmark content, systems, k, config, provenance and results, nothing newly computed): not "
                   "stored again; its id is returned", err=True)


def leaderboard(result: Any) -> str:
    from clonemem.evaluation.report import leaderboard as table

    return table(result)


# -- on-policy evaluation (the gym) -----------------------------------------------------------------


@app.command("gym")
@handles_errors
def gym(
    config: Annotated[Path, typer.Option("--config", help="run configuration (TOML); its [gym] section sets N_p, N_s, N_i")],
    systems: Annotated[str, typer.Option(
        "--systems", help="comma-separated memory systems (see `clonemem systems`) or the controls oracle_states, no_memory")],
    json_out: Annotated[Path | None, typer.Option("--json", help="also write the results to this JSON file")] = None,
    estimate: Annotated[bool, typer.Option("--estimate", help="price the run, the simulated user included (an offline dry run); call no API")] = False,
    max_cost: Annotated[float | None, typer.Option("--max-cost", min=0.0, help="stop before new spend would exceed this many USD")] = None,
) -> None:
    """On-policy evaluation (after AMemGym): a simulated user talks to each system's assistant, whose memory is
    asked state-dependent questions after every period; prints accuracy by position, memory scores and the
    on- vs off-policy rank table (exit 3 when the openings fail the exposure gate)."""
    from clonemem.gym.run import check_systems

    cfg = _config_for_run(config, max_cost, check_keys=not estimate)
    names = _csv(systems, "--systems")
    check_systems(names, cfg.gym.reference)
    if estimate:
        return _print_gym_estimate(cfg, names)
    from clonemem.prefect_env import on_early_server, start_server_early

    start_server_early()
    from clonemem.flows.gym import gym_flow
    from clonemem.gym.metrics import table
    from clonemem.progress import shown

    warehouse = _warehouse_for(cfg).expanduser().resolve()
    with writing(warehouse), shown(), on_early_server():
        result = gym_flow(str(warehouse), names, cfg)
    typer.echo(table(result))
    if json_out is not None:
        _write_json(json_out, result.report)


def _print_gym_estimate(cfg: Any, names: list[str]) -> None:
    from clonemem.cost import estimate_gym
    from clonemem.prefect_env import die_with_parent_server

    die_with_parent_server()
    typer.echo(estimate_gym(cfg, names).table())


@app.command("systems")
def systems_cmd(as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False) -> None:
    """List the registered memory systems (the names `evaluate --systems` accepts)."""
    from clonemem.memory import SYSTEMS

    names = SYSTEMS.names()
    typer.echo(json.dumps(names) if as_json else "\n".join(names))


# -- warehouse ---------------------------------------------------------------------------------


@app.command("serve-memory")
@handles_errors
def serve_memory(
    system: Annotated[str, typer.Argument(help="a registered memory system (see `clonemem systems`)")],
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="port on 127.0.0.1 (0: a free one)")] = 8765,
    config: Annotated[Path | None, typer.Option("--config", help="run configuration (the extractor's model, seed)")] = None,
    log: Annotated[Path | None, typer.Option("--log", help="append one JSON line per query: what the persona held")] = None,
) -> None:
    """Serve a memory system over the memory protocol (docs/memory-protocol.md) until Ctrl-C."""
    from clonemem.memory.serve import make_server, service_for
    from clonemem.schemas.config import load_config

    service = service_for(system, load_config(config), log)
    try:
        server = make_server(service, port)
    except OSError as exc:
        fail(f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}")
    host, bound = server.server_address[:2]
    typer.echo(f"serving {system} as {service.info.name} {service.info.version} at http://{host}:{bound} "
               "(Ctrl-C stops)")
    sys.stdout.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


@app.command("sql")
@handles_errors
def sql(
    query: Annotated[str, typer.Argument(help="SQL query (read-only)")],
    fmt: Annotated[str, typer.Option("--format", help="table, csv or json")] = "table",
    max_rows: Annotated[int, typer.Option("--max-rows", min=1, help="cut each result at this many rows")] = 10_000,
    timeout: Annotated[float, typer.Option("--timeout", min=0.001, help="stop a query after this many seconds")] = 30.0,
    memory_limit: Annotated[str | None, typer.Option(
        "--memory-limit", help="memory a query may use, e.g. 512MB [default: $CLONEMEM_SQL_MEMORY_LIMIT or 1GB]")] = None,
    temp_limit: Annotated[str | None, typer.Option(
        "--temp-limit", help="disk a query may spill to, e.g. 2GB [default: $CLONEMEM_SQL_TEMP_LIMIT or 1GB]")] = None,
) -> None:
    """Run read-only ad-hoc SQL over the warehouse (no writes, no files, no network, no settings)."""
    from clonemem import sqlcli

    if fmt not in sqlcli.FORMATS:
        fail(f"--format must be one of {', '.join(sqlcli.FORMATS)}", code=ExitCode.USAGE)
    sqlcli.check_read_only(query)
    for result in sqlcli.run(State.warehouse, query, max_rows=max_rows, timeout_s=timeout,
                             memory_limit=memory_limit, temp_limit=temp_limit):
        typer.echo(sqlcli.FORMATS[fmt](result))
        if result.truncated and fmt != "table":
            typer.echo(f"note: result cut at {max_rows} rows (--max-rows)", err=True)


@app.command("benchmarks")
@handles_errors
def benchmarks(
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
    show_all: Annotated[bool, typer.Option("--all", help="also list incomplete benchmarks (still landing, or interrupted)")] = False,
) -> None:
    """List the complete benchmarks in the warehouse (--all: incomplete ones too)."""
    from clonemem.warehouse import Warehouse

    keys = ["id", "name", "source", "gate_status", "personas", "traces", "questions", "status"]
    with Warehouse.open_reader(State.warehouse) as wh:
        where = "" if show_all else "WHERE status = 'complete' "
        rows = wh.rows(f"SELECT {', '.join(keys)} FROM v_benchmarks {where}ORDER BY name")
    items = [dict(zip(keys, r)) for r in rows]
    if as_json:
        typer.echo(json.dumps(items))
        return
    for it in items:
        flag = "" if it["status"] == "complete" else "  INCOMPLETE (re-run to resume, or `clonemem drop`)"
        typer.echo(f"{it['name']}  [{it['source']}, gate {it['gate_status']}]  personas {it['personas']}, "
                   f"traces {it['traces']}, questions {it['questions']}  id {it['id']}{flag}")


@app.command("drop")
@handles_errors
def drop(benchmark: Annotated[str, typer.Argument(help="benchmark id or name")]) -> None:
    """Remove a benchmark and everything that belongs to it, in one transaction."""
    from clonemem.warehouse import Warehouse
    from clonemem.warehouse.catalog import resolve_benchmark
    from clonemem.warehouse.lifecycle import drop_benchmark

    with writing(State.warehouse, runs_flows=False), Warehouse.open_writer(State.warehouse, wait_s=State.wait) as wh:
        bid, name = resolve_benchmark(wh, benchmark)
        removed = drop_benchmark(wh, bid)
    typer.echo(f"dropped benchmark {name!r} ({bid}): {sum(removed.values())} rows from {len(removed)} tables")


# -- the end-to-end demo -----------------------------------------------------------------------


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


@app.command("dashboard")
@handles_errors
def dashboard(
    warehouse: Annotated[Path | None, typer.Option("--warehouse", help="DuckDB warehouse file (overrides the global option)")] = None,
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="port on 127.0.0.1")] = 8501,
) -> None:
    """Start the read-only run-quality dashboard (Streamlit on 127.0.0.1; Ctrl-C stops it)."""
    import os

    from clonemem.dashboard import command

    path = (warehouse or State.warehouse).expanduser().resolve()
    if not path.is_file():
        typer.echo(f"note: no warehouse at {path} yet; the dashboard says so until one is created", err=True)
    typer.echo(f"dashboard: http://127.0.0.1:{port} (read-only over {path})", err=True)
    argv = command(path, port, sys.executable)
    sys.stderr.flush()
    os.execv(argv[0], argv)  # the server takes this process's place: its pid, its signals, its exit code


def main() -> None:
    from clonemem import interrupts

    interrupts.install()
    try:
        app()
        code: object = 0
    except SystemExit as exc:
        code = exc.code
    except KeyboardInterrupt:  # pragma: no cover
        code = int(ExitCode.INTERRUPTED)
    if interrupts.received():  # exit 130 now: no waiting for worker threads (see clonemem.interrupts)
        interrupts.leave()
    leave(code)


def leave(code: object) -> None:
    """Exit after the atexit hooks (Prefect stops its server, loggers flush), without interpreter teardown.

    duckdb 2.0's nanobind bindings print a "leaked instances" dump of 40-odd lines when objects of theirs
    (module-level type constants) are still referenced at teardown, which Prefect's and GX's background
    threads make happen in long runs. Every warehouse handle is closed before this point; the teardown
    would free nothing of ours, only print noise after the command's last line.
    """
    import atexit
    import os
    import threading

    from clonemem import interrupts

    interrupts.finishing()  # a Ctrl-C while threads drain: exit 130 at once, no traceback
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    # the interpreter's own order: threads' exit hooks (Prefect's log and event workers drain to the API),
    # then atexit (Prefect stops its temporary server), then teardown, which is what we skip
    threading._shutdown()  # type: ignore[attr-defined]  # private: the interpreter's own exit step, run early on purpose
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code or 0)


if __name__ == "__main__":  # pragma: no cover
    main()
