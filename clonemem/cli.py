"""The `clonemem` command line (SPEC §6). Commands parse arguments, call one service, print."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from pathlib import Path
from typing import Annotated, Any

import typer

from clonemem.errors import ExitCode
from clonemem.prefect_env import configure as _configure_prefect

# before Prefect is imported: it reads its settings (and sets up logging) at import time
_configure_prefect(debug="--debug" in sys.argv[1:])

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
        from clonemem.errors import exit_code_for, one_line, user_errors

        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort, KeyboardInterrupt):
            raise
        except Exception as exc:
            if State.debug:
                raise
            import duckdb

            if isinstance(exc, duckdb.Error):
                fail(one_line(exc))
            if isinstance(exc, user_errors()) or exit_code_for(exc) != ExitCode.ERROR:
                fail(str(exc), exit_code_for(exc))  # the project's messages: one line per problem
            fail(f"{type(exc).__name__}: {one_line(exc)} (unexpected; re-run with --debug for the traceback)")

    return wrapper


@contextmanager
def writing(warehouse: Path, *, runs_flows: bool = True) -> Iterator[None]:
    """Hold the warehouse's writer lock for a whole command (the stages it runs join this hold).

    Every command that writes runs flows, so this is also where the ephemeral Prefect server is
    tied to this process's life."""
    from clonemem.prefect_env import die_with_parent_server
    from clonemem.warehouse.lock import writer_lock

    if runs_flows:
        die_with_parent_server()
    with writer_lock(warehouse.expanduser().resolve(), wait_s=State.wait):
        yield


@app.callback()
def main_options(
    warehouse: Annotated[
        Path | None,
        typer.Option("--warehouse", envvar="CLONEMEM_WAREHOUSE", help="DuckDB warehouse file [default: ./clonemem.duckdb]"),
    ] = None,
    debug: Annotated[bool, typer.Option("--debug", help="show tracebacks and Prefect's logs")] = False,
    wait: Annotated[
        float | None,
        typer.Option("--wait", envvar="CLONEMEM_LOCK_WAIT", min=0,
                     help="seconds a write waits while another process writes the warehouse [default: 600]"),
    ] = None,
) -> None:
    State.warehouse = warehouse or Path(DEFAULT_WAREHOUSE)
    State.explicit = warehouse is not None
    State.debug = debug
    State.wait = wait


def _warehouse_for(config: Any) -> Path:
    if State.explicit or config.warehouse is None:
        return State.warehouse
    return config.warehouse


# -- release files -----------------------------------------------------------------------------


@app.command("import-release")
@handles_errors
def import_release(
    paths: Annotated[list[Path], typer.Argument(help="CloneMem release JSON files or folders (every *.json, recursively)")],
    name: Annotated[str, typer.Option("--name", help="benchmark name")],
    replace: Annotated[bool, typer.Option("--replace", help="replace an existing benchmark of that name (atomically)")] = False,
    append: Annotated[bool, typer.Option("--append", help="add these personas to an existing benchmark")] = False,
) -> None:
    """Load CloneMem release files as a benchmark (all files or nothing)."""
    from clonemem import release

    mode = _import_mode(replace, append)
    summary = release.import_into_warehouse(State.warehouse, lambda: release.parse_release_paths(paths), name, mode,
                                           wait_s=State.wait)
    _print_import(summary, State.warehouse)


@app.command("import-locomo")
@handles_errors
def import_locomo(
    paths: Annotated[list[Path], typer.Argument(help="LoCoMo files (one conversation each, or locomo10.json) or folders")],
    name: Annotated[str, typer.Option("--name", help="benchmark name")],
    replace: Annotated[bool, typer.Option("--replace", help="replace an existing benchmark of that name (atomically)")] = False,
    append: Annotated[bool, typer.Option("--append", help="add these conversations to an existing benchmark")] = False,
) -> None:
    """Load LoCoMo conversations as a benchmark: one persona per conversation, one trace per turn."""
    from clonemem import locomo, release

    mode = _import_mode(replace, append)
    summary = release.import_into_warehouse(State.warehouse, lambda: locomo.parse_locomo_paths(paths), name, mode,
                                           wait_s=State.wait)
    _print_import(summary, State.warehouse)


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
    from clonemem import release
    from clonemem.schemas.release import QUESTION_KEYS
    from clonemem.warehouse import Warehouse

    if questions_key not in QUESTION_KEYS:
        fail(f"--questions-key must be one of {', '.join(QUESTION_KEYS)}, got {questions_key!r}", code=2)
    with Warehouse.open_reader(State.warehouse) as wh:
        written = release.export_release(wh, benchmark, out, questions_key)
    for path in written:
        typer.echo(str(path))


# -- generation --------------------------------------------------------------------------------


@app.command("generate")
@handles_errors
def generate(
    config: Annotated[Path, typer.Option("--config", help="run configuration (TOML)")],
    persona: Annotated[int | None, typer.Option("--persona", help="generate only this persona index (scale-out)")] = None,
    bundle: Annotated[Path | None, typer.Option("--bundle", help="with --persona: write the persona here instead of landing")] = None,
    allow_empty_config: Annotated[bool, typer.Option("--allow-empty-config", help="accept a config file with no settings (all defaults)")] = False,
) -> None:
    """Run generation stages I–IV and the gate; prints the benchmark id (exit codes: see the README)."""
    from clonemem.schemas.config import load_config

    cfg = load_config(config, allow_empty=allow_empty_config)
    if (persona is None) != (bundle is None):
        fail("--persona and --bundle go together", code=2)
    if persona is not None and bundle is not None:
        from clonemem.flows.generation import generate_persona_flow

        out = generate_persona_flow(cfg.model_dump(mode="json"), persona, str(bundle))
        typer.echo(f"persona {persona} written to {bundle} ({out['failures']} failed items)", err=True)
        return
    from clonemem.flows.gate import gate_flow
    from clonemem.flows.generation import run_generation
    from clonemem.flows.qa import qa_flow

    warehouse = _warehouse_for(cfg).expanduser().resolve()
    with writing(warehouse):
        summary = run_generation(cfg, warehouse)
        _print_generation(summary, warehouse)
        if summary["landed"] + summary["unchanged"] == 0:
            fail(f"no persona was generated ({len(summary['failures'])} stage item(s) failed; see above): fix the "
                 "provider settings or the config and run the same command again (finished work is cached)",
                 ExitCode.NOTHING_GENERATED)
        qa = qa_flow(cfg.model_dump(mode="json"), str(warehouse))
        _print_qa(qa)
        status = _gate_status(warehouse, summary["benchmark_id"])
        if summary["landed"] == 0 and qa["landed"] == 0 and status in ("passed", "failed"):
            # nothing changed since the last gate: re-running leaves the warehouse exactly as it was
            typer.echo(f"gate: content unchanged since the last gate run; status {status}", err=True)
        else:
            status = gate_flow(str(warehouse), summary["benchmark_id"])
            _print_gate(status)
            status = status["status"]
    typer.echo(summary["benchmark_id"])
    if status != "passed":
        fail(f"benchmark {cfg.name!r} was stored but failed the gate (see the failed expectations above): fix the "
             f"config and generate again, or evaluate it anyway with `clonemem evaluate {cfg.name} --force`",
             ExitCode.GATE_FAILED)


def _gate_status(warehouse: Path, benchmark_id: str) -> str | None:
    from clonemem.warehouse import Warehouse

    with Warehouse.open_reader(warehouse) as wh:
        return wh.scalar("SELECT gate_status FROM benchmarks WHERE benchmark_id = ?", [benchmark_id])


def _print_qa(q: dict) -> None:
    status = q["status"]
    typer.echo(f"stage IV: {status.get('accepted', 0)} questions accepted, {status.get('rejected', 0)} rejected "
               f"({q['rejection_rate']}), {status.get('infeasible', 0)} candidates infeasible; by type "
               f"{q['by_type']}; by dimension {q['by_dimension']}; {q['llm_calls']} LLM calls", err=True)
    cues = q["cues"]
    typer.echo(f"  superficial cues: longest option right {cues['longest_option_accuracy']}, "
               f"word overlap right {cues['overlap_option_accuracy']} (chance 0.25); correct letters "
               f"{cues['correct_letter_distribution']}", err=True)


def _print_gate(g: dict) -> None:
    failed = [o for o in g["outcomes"] if not o["success"]]
    typer.echo(f"gate {g['status']}: {len(g['outcomes']) - len(failed)}/{len(g['outcomes'])} expectations met; "
               f"data docs: {g['data_docs']}", err=True)
    for o in failed:
        typer.echo(f"  FAILED {o['suite']}: {o['expectation']} (unexpected: {o['unexpected_count']}, "
                   f"observed: {json.dumps(o['observed'], default=str)[:200]})", err=True)
        for row in o["failing_sample"][:3]:
            typer.echo(f"    e.g. {json.dumps(row, default=str)[:300]}", err=True)


@app.command("gate")
@handles_errors
def gate(benchmark: Annotated[str, typer.Argument(help="benchmark id or name")]) -> None:
    """Run the Great Expectations gate; exit 3 when the benchmark fails it."""
    from clonemem.flows.gate import gate_flow

    with writing(State.warehouse):
        result = gate_flow(str(State.warehouse.expanduser().resolve()), benchmark)
    _print_gate(result)
    if result["status"] != "passed":
        fail(f"benchmark {benchmark!r} failed the gate (see above); `clonemem evaluate` refuses it unless --force",
             ExitCode.GATE_FAILED)


def _print_generation(s: dict, warehouse: Path) -> None:
    err = lambda msg: typer.echo(msg, err=True)  # noqa: E731
    err(f"benchmark {s['name']!r} in {warehouse}: {s['personas']} persona(s), {s['landed']} landed, "
        f"{s['unchanged']} unchanged; {s['detailed_events']} detailed events, {s['evidence']} evidence, "
        f"{s['traces']} traces; {s['llm_calls']} LLM calls in {s['seconds']:.1f} s")
    if s["failures"]:
        err(f"{len(s['failures'])} stage item(s) failed after retries:")
        for f in s["failures"][:20]:
            err(f"  {f['persona']} {f['stage']} {f['item']}: {f['error']}")
    for d in s["dropped"][:20]:
        err(f"  dropped {d}")


@app.command("land")
@handles_errors
def land_bundles(bundles: Annotated[list[Path], typer.Argument(help="persona bundles from `generate --persona`")]) -> None:
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


@app.command("evaluate")
@handles_errors
def evaluate(
    benchmark: Annotated[str, typer.Argument(help="benchmark id or name")],
    systems: Annotated[str, typer.Option("--systems", help="comma-separated; see `clonemem systems`")] = "",
    k: Annotated[str, typer.Option("--k", help="retrieval depths, comma-separated")] = "5,10,20",
    json_out: Annotated[Path | None, typer.Option("--json", help="also write the results to this JSON file")] = None,
    config: Annotated[Path | None, typer.Option("--config", help="run configuration (models, bootstrap)")] = None,
    force: Annotated[bool, typer.Option("--force", help="evaluate a benchmark that did not pass the gate")] = False,
) -> None:
    """Score memory systems on a benchmark; write metrics to the warehouse (and --json)."""
    from clonemem.flows.evaluation import evaluate_flow
    from clonemem.schemas.config import load_config

    cfg = load_config(config)
    names = _csv(systems, "--systems") if systems else list(cfg.evaluation.systems)
    try:
        ks = sorted({int(x) for x in _csv(k, "--k")})
    except ValueError:
        fail(f"--k must be comma-separated integers, got {k!r}", code=2)
    if any(x < 1 for x in ks):
        fail("--k values must be at least 1", code=2)
    _precheck_evaluation(benchmark, names, force)
    with writing(State.warehouse):
        try:
            result = evaluate_flow(cfg.model_dump(mode="json"), str(State.warehouse.expanduser().resolve()), benchmark,
                                   names, ks, force)
        except Exception as exc:
            if State.debug:
                raise
            from clonemem.errors import one_line

            fail(f"evaluation failed, nothing was stored: {type(exc).__name__}: {one_line(exc)}; fix the failing "
                 "system (or leave it out of --systems) and run again; --debug shows the traceback",
                 ExitCode.SYSTEMS_FAILED)
    typer.echo(leaderboard(result))
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(result, indent=1, default=str), "utf-8")
        typer.echo(f"results written to {json_out}", err=True)
    missing = _failed_systems(result, names, ks)
    if missing:
        fail(f"{len(missing)} requested system(s) failed to evaluate: {', '.join(missing)}; the others were stored. "
             "Fix them (or leave them out of --systems) and run again", ExitCode.SYSTEMS_FAILED)


def _failed_systems(result: dict, names: list[str], ks: list[int]) -> list[str]:
    """Requested systems with a missing or failed (system, k) entry in the result."""
    failed = set(result.get("failed_systems") or [])
    seen = {(r["system"], r["k"]) for r in result.get("results", []) if not r.get("error")}
    failed |= {s for s in names for k in ks if (s, k) not in seen}
    return [s for s in names if s in failed]


def _precheck_evaluation(benchmark: str, names: list[str], force: bool) -> None:
    """Fail before the flow starts (the flow checks again, for deployments): unknown systems, an ungated benchmark."""
    from clonemem.flows.evaluation import require_gate
    from clonemem.memory import SYSTEMS
    from clonemem.warehouse import Warehouse

    for name in names:
        SYSTEMS.get(name)
    with Warehouse.open_reader(State.warehouse) as wh:
        require_gate(wh, benchmark, force)


def leaderboard(result: dict) -> str:
    """A table like the paper's Tables 3–4: retrieval and QA metrics per system and k."""
    cols = [("recall_flat", "R-flat"), ("recall_all_any", "R-all-any"), ("recall_any_any", "R-any-any"),
            ("choice_accuracy", "choice"), ("qa_consistency", "QA-cons"), ("mem_recall", "mem-rec"),
            ("mem_helpful", "mem-help"), ("context_tokens", "ctx-tok")]
    head = f"{'system':<18}{'k':>4}" + "".join(f"{label:>11}" for _, label in cols)
    lines = [f"benchmark {result['benchmark']} ({'offline answerer/judge' if result.get('offline') else 'live models'})",
             head, "-" * len(head)]
    for r in result["results"]:
        cells = "".join(f"{r[m]:>11.3f}" if isinstance(r[m], float) else f"{'-':>11}" for m, _ in cols)
        lines.append(f"{r['system']:<18}{r['k']:>4}{cells}")
    return "\n".join(lines)


@app.command("systems")
def systems_cmd(as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False) -> None:
    """List the registered memory systems (the names `evaluate --systems` accepts)."""
    from clonemem.memory import SYSTEMS

    names = SYSTEMS.names()
    typer.echo(json.dumps(names) if as_json else "\n".join(names))


# -- warehouse ---------------------------------------------------------------------------------


@app.command("sql")
@handles_errors
def sql(
    query: Annotated[str, typer.Argument(help="SQL query (read-only)")],
    fmt: Annotated[str, typer.Option("--format", help="table, csv or json")] = "table",
    max_rows: Annotated[int, typer.Option("--max-rows", min=1, help="cut each result at this many rows")] = 10_000,
    timeout: Annotated[float, typer.Option("--timeout", min=0.001, help="stop a query after this many seconds")] = 30.0,
) -> None:
    """Run read-only ad-hoc SQL over the warehouse (no writes, no files, no network, no settings)."""
    from clonemem import sqlcli

    if fmt not in sqlcli.FORMATS:
        fail(f"--format must be one of {', '.join(sqlcli.FORMATS)}", code=ExitCode.USAGE)
    sqlcli.check_read_only(query)
    for result in sqlcli.run(State.warehouse, query, max_rows=max_rows, timeout_s=timeout):
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
    from clonemem.warehouse.catalog import resolve_benchmark
    from clonemem.warehouse import Warehouse
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

    with writing(State.warehouse):
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
    try:
        app()
    except KeyboardInterrupt:  # pragma: no cover
        sys.exit(int(ExitCode.INTERRUPTED))


if __name__ == "__main__":  # pragma: no cover
    main()
