"""`leaderboard` (a benchmark's systems across evaluations) and `compare` (systems question by question,
or one system's failures)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from clonemem.cli.app import State, app
from clonemem.cli.exit import fail, handles_errors, usage
from clonemem.cli.options import csv


def _metric(metric: str) -> str:
    from clonemem.schemas.results import AGGREGATED

    if metric not in AGGREGATED:
        usage(f"--metric must be one of {', '.join(AGGREGATED)}, got {metric!r}")
    return metric


@app.command("leaderboard")
@handles_errors
def leaderboard(
    benchmark: Annotated[str, typer.Argument(help="benchmark id or name")],
    k: Annotated[int | None, typer.Option("--k", min=1, help="one k [default: every k]")] = None,
    protocol: Annotated[
        str | None,
        typer.Option(
            "--protocol", help="a standard protocol's columns (locomo, mem0, longmemeval, ...)"
        ),
    ] = None,
    metric: Annotated[
        str, typer.Option("--metric", help="the metric ranks follow")
    ] = "recall_flat",
    as_json: Annotated[bool, typer.Option("--json", help="print the leaderboard as JSON")] = False,
) -> None:
    """The latest evaluation of every system on a benchmark, comparable rows ranked together."""
    from clonemem.evaluation import leaderboard as L
    from clonemem.warehouse import Warehouse
    from clonemem.warehouse.catalog import resolve_benchmark
    from clonemem.warehouse.leaderboard import wh_query

    _metric(metric)
    if protocol is not None and not protocol.strip():
        usage("--protocol must name a protocol (locomo, mem0, longmemeval, personamem)")
    with Warehouse.open_reader(State.warehouse) as wh:
        bid, name = resolve_benchmark(wh, benchmark)
        board = L.read_board(wh_query(wh), bid, name, metric, k, protocol)
    if k is not None and not board.groups:
        fail(f"no system of {name!r} was scored at k = {k}")
    if protocol is not None and not any(r.protocol for g in board.groups for r in g.rows):
        fail(
            f"no latest evaluation of {name!r} computed the protocol {protocol!r} (its importer declares "
            'the protocols an evaluation computes; see `clonemem evaluate --json`\'s "protocols")'
        )
    typer.echo(board.model_dump_json(indent=1) if as_json else L.text(board))


@app.command("compare")
@handles_errors
def compare(
    benchmark: Annotated[str, typer.Argument(help="benchmark id or name")],
    systems: Annotated[
        list[str], typer.Argument(help="systems, the first the baseline (or one with --failures)")
    ],
    k: Annotated[
        int | None, typer.Option("--k", min=1, help="k [default: the smallest shared]")
    ] = None,
    metric: Annotated[str, typer.Option("--metric", help="per-question metric")] = "recall_flat",
    failures: Annotated[
        bool,
        typer.Option(
            "--failures", help="list one system's missed questions with what it retrieved"
        ),
    ] = False,
    top: Annotated[int, typer.Option("--top", min=1, help="questions listed")] = 10,
    seed: Annotated[int, typer.Option("--seed", help="bootstrap seed")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Per question type, each system's difference from the first with paired bootstrap intervals, and
    the questions they disagree on most; with --failures, one system's missed questions."""
    from clonemem.evaluation import compare as C
    from clonemem.evaluation.leaderboard import NotEvaluated
    from clonemem.warehouse import Warehouse
    from clonemem.warehouse.catalog import resolve_benchmark
    from clonemem.warehouse.leaderboard import wh_query

    names = csv(",".join(systems), "SYSTEMS")
    _metric(metric)
    if failures and len(names) != 1:
        usage("--failures lists one system's failures: name exactly one system")
    if not failures and len(names) < 2:
        usage("compare needs two systems or more (or one with --failures)")
    if len(set(names)) != len(names):
        usage("a system is named twice")
    with Warehouse.open_reader(State.warehouse) as wh:
        bid, name = resolve_benchmark(wh, benchmark)
        try:
            if failures:
                eid, kk, missed = C.read_failures(wh_query(wh), bid, name, names[0], k, top)
            else:
                got = C.read_comparison(
                    wh_query(wh), bid, name, names, metric, k, seed=seed, top=top
                )
        except NotEvaluated as exc:
            fail(str(exc))
    if failures:
        if as_json:
            typer.echo(
                json.dumps(
                    {
                        "format_version": C.FORMAT_VERSION,
                        "benchmark": name,
                        "system": names[0],
                        "k": kk,
                        "eval_run_id": eid,
                        "failures": [f.model_dump(mode="json") for f in missed],
                    },
                    indent=1,
                )
            )
        else:
            typer.echo(failures_text(name, names[0], kk, eid, missed))
        return
    typer.echo(got.model_dump_json(indent=1) if as_json else comparison_text(got))


def comparison_text(c: object) -> str:
    from clonemem.evaluation.compare import Comparison

    assert isinstance(c, Comparison)
    lines = [
        f"{', '.join(c.systems[1:])} against {c.systems[0]} on {c.benchmark!r}, {c.metric} at k = {c.k}: "
        "mean per-question difference with a paired 95% bootstrap interval (* excludes 0)"
    ]
    lines += [f"evaluations: {', '.join(f'{s} {e}' for s, e in c.eval_run_ids.items())}"]
    lines += [f"warning: not comparable, {w}" for w in c.warnings]
    if c.unpaired:
        lines.append(f"{c.unpaired} questions not asked of every system are left out")
    head = f"{'system':<16} {'question type':<28} {'n':>5} {c.systems[0][:12]:>12} {'system':>8} {'difference':>28}"
    lines += ["", head, "-" * len(head)]
    for d in c.differences:
        ci = "" if d.ci_low is None else f" [{d.ci_low:+.3f}, {d.ci_high:+.3f}]"
        diff = (
            "–"
            if d.difference is None
            else f"{d.difference:+.3f}{ci}{' *' if d.significant else ''}"
        )
        lines.append(
            f"{d.system:<16} {d.question_type:<28} {d.n:>5} {_v(d.baseline_value):>12} "
            f"{_v(d.value):>8} {diff:>28}"
        )
    if c.disagreements:
        lines += ["", f"questions they disagree on most ({c.metric} per system):"]
        for q in c.disagreements:
            values = ", ".join(f"{s} {_v(v)}" for s, v in q.values.items())
            lines.append(f"  {q.question} ({q.question_type}): {values}: {q.text[:100]}")
    return "\n".join(lines)


def failures_text(benchmark: str, system: str, k: int, eval_run_id: str, missed: list) -> str:
    if not missed:
        return f"{system} missed no question at k = {k} on {benchmark!r} (evaluation {eval_run_id})"
    lines = [
        f"{system} on {benchmark!r} at k = {k} (evaluation {eval_run_id}): questions missed (recall_flat "
        "below 1 or a wrong choice), worst first"
    ]
    for f in missed:
        choice = (
            ""
            if f.correct_choice is None
            else f", choice {f.choice or '–'} (right: {f.correct_choice})"
        )
        lines += [
            "",
            f"{f.question} ({f.question_type}): recall_flat {_v(f.recall_flat)}{choice}"
            + (f", failed at {f.diagnosis}" if f.diagnosis and f.diagnosis != "correct" else ""),
            f"  Q: {f.text}",
            f"  gold traces: {', '.join(f.gold) or '–'}",
            f"  retrieved:   {', '.join(f.retrieved) or 'nothing'}",
        ]
        lines += [f"    {i}. {t}" for i, t in enumerate(f.texts, 1)]
    return "\n".join(lines)


def _v(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"
