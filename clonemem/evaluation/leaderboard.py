"""A benchmark's leaderboard across evaluations: the latest evaluation of every system,
whichever run produced it (the built-ins evaluated together, a system evaluated alone, a results file),
ranked only beside rows it is comparable with.

Two rows are comparable when they were scored on the same benchmark content, at the same k, with the
same aggregation, answerer and judge, in the same retrieval mode and on the same questions (all of
them, or the same quick-run sample): :class:`Key`. Per k the largest comparable group is the main
table; every other group is shown apart with what differs from it (:attr:`Group.reason`). Each row
carries its evaluation id, its provenance and what changed since the system's previous evaluation
(:func:`system_changes`, which the History page shows too).

Pure functions over the warehouse's rows (``clonemem/warehouse/leaderboard.py`` reads them); the
command line, the Prefect artifact and the dashboard render what :func:`board` returns.
"""

from __future__ import annotations

import datetime as dt
import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import polars as pl
from pydantic import BaseModel, ConfigDict, Field

from clonemem.evaluation.sample import SampleSpec
from clonemem.schemas.results import Provenance
from clonemem.warehouse import leaderboard as W

FORMAT_VERSION = "1.0"  # of `clonemem leaderboard --json`
HEADLINE = "recall_flat"
ALL_QUESTIONS = "all questions"
UNRECORDED = "not recorded"  # a field an older evaluation did not store


class _M(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Figure(_M):
    """One metric of a row: the value over ``n`` questions with its 95% bootstrap interval."""

    value: float | None
    ci_low: float | None = None
    ci_high: float | None = None
    n: int = 0


class Key(_M):
    """What two rows must share to be ranked together."""

    content_hash: str
    k: int
    aggregation: str
    answerer: str
    judge: str
    mode: str
    sample: str

    def differences(self, main: Key) -> list[str]:
        """What differs from ``main``, one phrase each, naming both sides."""
        out = []
        for field, label in (
            ("content_hash", "benchmark content"),
            ("mode", "retrieval mode"),
            ("sample", "questions"),
            ("answerer", "answerer"),
            ("judge", "judge"),
            ("aggregation", "aggregation"),
        ):
            mine, theirs = getattr(self, field), getattr(main, field)
            if mine != theirs:
                out.append(f"{label} {mine} (main table: {theirs})")
        return out


class Row(_M):
    """One system at one k, from its latest evaluation on the benchmark."""

    system: str
    k: int
    mode: str  # replay | in_process | not recorded
    rank: int | None = (
        None  # within its group, by the headline metric (1 = best); None without a value
    )
    eval_run_id: str
    started_at: dt.datetime
    sample: str  # "all questions", or the quick run's label
    answerer: str
    judge: str
    offline: str | None = None  # which roles were the offline heuristics: "offline judge", ...
    aggregation: str
    content_hash: str
    metrics: dict[str, Figure] = Field(default_factory=dict)
    provenance: dict[str, Any] = Field(default_factory=dict)  # the system's and the run's identity
    changes: list[str] = Field(default_factory=list)  # since the system's previous evaluation
    # with ``--protocol``: that standard protocol's groups of this (evaluation, system) at this k (answer
    # scores) or at its own cut-offs (LongMemEval's retrieval rows): ``ProtocolRow`` JSON
    protocol: list[dict[str, Any]] = Field(default_factory=list)

    @property
    def key(self) -> Key:
        return Key(
            content_hash=self.content_hash,
            k=self.k,
            aggregation=self.aggregation,
            answerer=self.answerer,
            judge=self.judge,
            mode=self.mode,
            sample=self.sample,
        )


class Group(_M):
    """Rows ranked together; ``reason`` says why they stand apart from the main table (None: it is)."""

    k: int
    reason: str | None
    rows: list[Row]


class Board(_M):
    """The leaderboard (``clonemem leaderboard --json``)."""

    format_version: str = FORMAT_VERSION
    benchmark: str
    metric: str  # the headline the ranks follow
    protocol: str | None = None  # the standard protocol whose groups each row carries
    groups: list[Group]


# -- one evaluation's identity ------------------------------------------------------------------


def offline_label(answerer_offline: bool, judge_offline: bool) -> str | None:
    """Exactly which roles were the offline heuristics: ``offline answerer``, ``offline judge``,
    ``offline answerer and judge``, or None."""
    roles = [r for r, off in (("answerer", answerer_offline), ("judge", judge_offline)) if off]
    return f"offline {' and '.join(roles)}" if roles else None


def is_offline_ref(ref: str | None) -> bool:
    return ref is not None and ref.split("/", 1)[0] == "offline"


def aggregation_label(aggregate: str, exclude_no_evidence: bool) -> str:
    return ("mean of persona means" if aggregate == "personas" else "mean over questions") + (
        ", no-evidence left out" if exclude_no_evidence else ""
    )


def _models(config: Mapping[str, Any], prov: Provenance | None) -> tuple[str, str]:
    if prov is not None:
        return prov.answerer, prov.judge
    models = config.get("models") or {}
    return str(models.get("answerer", UNRECORDED)), str(models.get("judge", UNRECORDED))


def _aggregation(config: Mapping[str, Any], prov: Provenance | None) -> str:
    if prov is not None:
        return aggregation_label(prov.aggregation.aggregate, prov.aggregation.exclude_no_evidence)
    agg = config.get("aggregation") or {}
    return aggregation_label(
        str(agg.get("aggregate", "questions")), bool(agg.get("exclude_no_evidence"))
    )


def sample_label(sample_json: str | None) -> str:
    return ALL_QUESTIONS if not sample_json else SampleSpec.model_validate_json(sample_json).label()


def _provenance(prov: Provenance | None, system: str) -> dict[str, Any]:
    """The system's provenance fields with the run's (project version, commit, packages)."""
    if prov is None:
        return {}
    own = prov.system(system)
    out: dict[str, Any] = {} if own is None else own.model_dump(mode="json", exclude={"system"})
    out.update(
        project_version=prov.project_version, git_commit=prov.git_commit, git_dirty=prov.git_dirty
    )
    return out


class Evaluated(_M):
    """One (evaluation, system) as the warehouse has it, parsed."""

    eval_run_id: str
    started_at: dt.datetime
    system: str
    mode: str
    content_hash: str
    sample: str
    answerer: str
    judge: str
    offline: str | None
    aggregation: str
    config: dict[str, Any] = Field(default_factory=dict)
    provenance: dict[str, Any] = Field(default_factory=dict)
    packages: dict[str, str | None] = Field(default_factory=dict)


def _config(config: Mapping[str, Any]) -> dict[str, Any]:
    """The stored config but what the row shows elsewhere (systems, k, answerer, judge, aggregation)."""
    out = {c: v for c, v in config.items() if c not in ("systems", "k", "aggregation")}
    if isinstance(out.get("models"), Mapping):
        out["models"] = {r: m for r, m in out["models"].items() if r not in ("answerer", "judge")}
    return out


def evaluated(rows: pl.DataFrame) -> list[Evaluated]:
    """Parse ``warehouse.leaderboard.system_evaluations`` rows (oldest first)."""
    out = []
    for r in rows.iter_rows(named=True):
        prov = (
            Provenance.model_validate_json(r["provenance_json"]) if r["provenance_json"] else None
        )
        config = json.loads(r["config_json"]) if r["config_json"] else {}
        answerer, judge = _models(config, prov)
        out.append(
            Evaluated(
                eval_run_id=r["eval_run_id"],
                started_at=r["started_at"],
                system=r["system"],
                mode=r["retrieval_mode"] or UNRECORDED,
                content_hash=r["content_hash"] or UNRECORDED,
                sample=sample_label(r["sample_json"]),
                answerer=answerer,
                judge=judge,
                offline=offline_label(
                    bool(r["answers_offline"]) or is_offline_ref(answerer), is_offline_ref(judge)
                ),
                aggregation=_aggregation(config, prov),
                config=_config(config),
                provenance=_provenance(prov, r["system"]),
                packages=dict(prov.packages) if prov else {},
            )
        )
    return out


# -- what changed between a system's evaluations ---------------------------------------------------


def _flat(prefix: str, value: Any) -> dict[str, Any]:
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flat(f"{prefix} {k}" if prefix else str(k), v))
        return out
    return {prefix: value}


def _identity(e: Evaluated) -> dict[str, Any]:
    """Every field whose change makes a system's figures another system's: how it was fed, the models,
    the aggregation, the questions and content, its own provenance (code hash, stage models, a remote
    system's URL, name, version and protocol, a results file's hash), the project and packages, the
    config."""
    return {
        "retrieval mode": e.mode,
        "answerer": e.answerer,
        "judge": e.judge,
        "aggregation": e.aggregation,
        "questions": e.sample,
        "benchmark content": e.content_hash,
        **_flat("", e.provenance),
        **_flat("package", e.packages),
        **_flat("config", e.config),
    }


def _short(value: Any) -> str:
    text = "–" if value is None else str(value)
    return text if len(text) <= 60 else text[:57] + "..."


def changed(before: Evaluated, after: Evaluated) -> list[str]:
    """What differs between two evaluations of one system (``field: old → new``). A field one of them
    did not record (an older evaluation) is no change: unknown is not different."""
    a, b = _identity(before), _identity(after)
    out = []
    for name in sorted(set(a) | set(b)):
        old, new = a.get(name), b.get(name)
        if old == new or UNRECORDED in (old, new) or name not in a or name not in b:
            continue
        out.append(f"{name}: {_short(old)} → {_short(new)}")
    return out


def system_changes(rows: Sequence[Evaluated]) -> pl.DataFrame:
    """Each (evaluation, system) whose identity differs from that system's previous evaluation on the
    benchmark (whichever evaluations came between), with what changed ("; "-joined)."""
    last: dict[str, Evaluated] = {}
    out = []
    for e in sorted(rows, key=lambda e: (e.started_at, e.eval_run_id)):
        before = last.get(e.system)
        if before is not None and (diff := changed(before, e)):
            out.append(
                {
                    "eval_run_id": e.eval_run_id,
                    "started_at": e.started_at,
                    "system": e.system,
                    "changes": "; ".join(diff),
                }
            )
        last[e.system] = e
    return pl.DataFrame(
        out,
        schema={
            "eval_run_id": pl.Utf8,
            "started_at": pl.Datetime("us"),
            "system": pl.Utf8,
            "changes": pl.Utf8,
        },
    )


# -- the board ---------------------------------------------------------------------------------------


def latest(rows: Sequence[Evaluated]) -> dict[str, Evaluated]:
    """Per system, its latest evaluation on the benchmark (by start time, then id)."""
    out: dict[str, Evaluated] = {}
    for e in sorted(rows, key=lambda e: (e.started_at, e.eval_run_id)):
        out[e.system] = e
    return out


def _figures(metrics: pl.DataFrame) -> dict[tuple[str, str, int], dict[str, Figure]]:
    out: dict[tuple[str, str, int], dict[str, Figure]] = defaultdict(dict)
    for m in metrics.iter_rows(named=True):
        out[(m["eval_run_id"], m["system"], m["k"])][m["metric"]] = Figure(
            value=m["value"], ci_low=m["ci_low"], ci_high=m["ci_high"], n=int(m["n"] or 0)
        )
    return out


def _ranked(rows: Iterable[Row], metric: str) -> list[Row]:
    """Ranks by ``metric`` (higher is better; equal values share the better rank), unranked rows last."""

    def value(r: Row) -> float | None:
        f = r.metrics.get(metric)
        return None if f is None else f.value

    ordered = sorted(rows, key=lambda r: (value(r) is None, -(value(r) or 0.0), r.system))
    out, previous, rank = [], None, 0
    for i, r in enumerate(ordered, 1):
        v = value(r)
        if v is not None and v != previous:
            rank, previous = i, v
        out.append(r.model_copy(update={"rank": rank if v is not None else None}))
    return out


def board(
    benchmark: str,
    rows: Sequence[Evaluated],
    metrics: pl.DataFrame,
    metric: str = HEADLINE,
    k: int | None = None,
    changes: pl.DataFrame | None = None,
) -> Board:
    """The leaderboard from every (evaluation, system) of the benchmark and the ``all`` metrics of
    their latest ones (``metrics``: ``system_metrics`` rows), at ``k`` (None: every k evaluated)."""
    newest = latest(rows)
    figures = _figures(metrics)
    diffs = {
        (r["eval_run_id"], r["system"]): r["changes"].split("; ")
        for r in (changes if changes is not None else system_changes(rows)).iter_rows(named=True)
    }
    by_k: dict[int, list[Row]] = defaultdict(list)
    for (eid, system, kk), figs in figures.items():
        e = newest.get(system)
        if e is None or e.eval_run_id != eid or (k is not None and kk != k):
            continue
        by_k[kk].append(
            Row(
                system=system,
                k=kk,
                mode=e.mode,
                eval_run_id=eid,
                started_at=e.started_at,
                sample=e.sample,
                answerer=e.answerer,
                judge=e.judge,
                offline=e.offline,
                aggregation=e.aggregation,
                content_hash=e.content_hash,
                metrics=figs,
                provenance=e.provenance,
                changes=diffs.get((eid, system), []),
            )
        )
    groups: list[Group] = []
    for kk in sorted(by_k):
        keyed: dict[Key, list[Row]] = defaultdict(list)
        for r in by_k[kk]:
            keyed[r.key].append(r)
        main = max(keyed, key=lambda key: _preference(key, keyed[key]))
        groups.append(Group(k=kk, reason=None, rows=_ranked(keyed[main], metric)))
        for key in sorted(
            (x for x in keyed if x != main), key=lambda x: (-len(keyed[x]), x.mode, x.sample)
        ):
            groups.append(
                Group(
                    k=kk, reason="; ".join(key.differences(main)), rows=_ranked(keyed[key], metric)
                )
            )
    return Board(benchmark=benchmark, metric=metric, groups=groups)


def _preference(key: Key, rows: list[Row]) -> tuple:
    """The main table: the most systems; then all questions, replay, known content, the newest."""
    return (
        len(rows),
        key.sample == ALL_QUESTIONS,
        key.mode == "replay",
        key.content_hash != UNRECORDED,
        max(r.started_at for r in rows),
    )


# -- reading it from the warehouse -------------------------------------------------------------------


class NotEvaluated(ValueError):
    """A system asked for that the benchmark has no evaluation of (or none at the k asked)."""


def read_board(
    query: W.Query,
    benchmark_id: str,
    benchmark: str,
    metric: str = HEADLINE,
    k: int | None = None,
    protocol: str | None = None,
) -> Board:
    """The benchmark's leaderboard as the warehouse has it now; with ``protocol``, each row carries that
    standard protocol's groups (:func:`with_protocol`)."""
    rows = evaluated(W.system_evaluations(query, benchmark_id))
    pairs = [(e.eval_run_id, s) for s, e in latest(rows).items()]
    got = board(
        benchmark,
        rows,
        W.system_metrics(query, pairs) if pairs else _NO_METRICS,
        metric,
        k,
        system_changes(rows),
    )
    if protocol is None:
        return got
    return with_protocol(
        got, protocol, W.protocol_metrics(query, pairs, protocol) if pairs else pl.DataFrame()
    )


def with_protocol(b: Board, protocol: str, records: pl.DataFrame) -> Board:
    """Each row with the protocol's groups of its evaluation and system: answer-score groups at the row's
    k, retrieval groups (which have their own cut-offs) on every row."""
    from clonemem.schemas.results import ProtocolRow

    merged = ProtocolRow.merged(records.iter_rows(named=True)) if records.height else []
    groups = []
    for g in b.groups:
        rows = [
            r.model_copy(
                update={
                    "protocol": [
                        p.model_dump(mode="json")
                        for p in merged
                        if p.eval_run_id == r.eval_run_id
                        and p.system == r.system
                        and (p.granularity is not None or p.k == r.k)
                    ]
                }
            )
            for r in g.rows
        ]
        groups.append(g.model_copy(update={"rows": rows}))
    return b.model_copy(update={"protocol": protocol, "groups": groups})


_NO_METRICS = pl.DataFrame(
    schema={
        "eval_run_id": pl.Utf8,
        "system": pl.Utf8,
        "k": pl.Int64,
        "group_value": pl.Utf8,
        "metric": pl.Utf8,
        "n": pl.Int64,
        "value": pl.Float64,
        "ci_low": pl.Float64,
        "ci_high": pl.Float64,
    }
)


def rows_of(b: Board, systems: Sequence[str], k: int | None) -> tuple[int, dict[str, Row]]:
    """The board's rows of ``systems`` at ``k`` (None: the smallest k every one of them was scored at)."""
    ks: dict[str, dict[int, Row]] = defaultdict(dict)
    for g in b.groups:
        for r in g.rows:
            ks[r.system][r.k] = r
    missing = [s for s in systems if s not in ks]
    if missing:
        known = ", ".join(sorted(ks)) or "none"
        raise NotEvaluated(
            f"{', '.join(missing)}: not evaluated on {b.benchmark!r} (evaluated: {known})"
        )
    common = set.intersection(*(set(ks[s]) for s in systems))
    if k is None:
        if not common:
            raise NotEvaluated(f"{', '.join(systems)} share no k on {b.benchmark!r}: give --k")
        k = min(common)
    elif k not in common:
        raise NotEvaluated(
            f"not every one of {', '.join(systems)} was scored at k = {k} on {b.benchmark!r} "
            f"(shared: {', '.join(map(str, sorted(common))) or 'none'})"
        )
    return k, {s: ks[s][k] for s in systems}


def not_comparable(rows: Mapping[str, Row]) -> list[str]:
    """Why rows may not be ranked together: each one's differences from the first's key."""
    first, *others = rows.values()
    return [
        f"{r.system}: {'; '.join(d)}"
        for r in others
        if (d := [x.replace("main table", first.system) for x in r.key.differences(first.key)])
    ]


# -- as text and Markdown (the command line, the Prefect artifact) -----------------------------------

SHOWN = ("recall_flat", "recall_any_any", "choice_accuracy", "qa_consistency")


def identity(row: Row) -> str:
    """The row's provenance in a few words: a remote system's name, version, protocol and URL, a results
    file's name and hash, or the code hash; and the project's commit."""
    p = row.provenance
    extra = p.get("extra") or {}
    remote = {f: extra.get(f) or extra.get(f"remote_{f}") for f in ("url", "name", "version")}
    if remote["url"]:
        who = " ".join(str(remote[f]) for f in ("name", "version") if remote[f]) or "remote"
        proto = f" protocol {extra['protocol']}" if extra.get("protocol") else ""
        own = f"{who}{proto} at {remote['url']}"
    elif "sha256" in extra:
        own = f"file {extra.get('file', '?')} sha256 {str(extra['sha256'])[:12]}"
    elif p.get("code_hash"):
        own = f"code {str(p['code_hash'])[:12]}"
    else:
        own = "provenance not recorded"
    commit = p.get("git_commit")
    return own + (f", clonemem {str(commit)[:8]}" if commit else "")


def _figure(f: Figure | None) -> str:
    if f is None or f.value is None:
        return "–"
    return f"{f.value:.3f}" + (f" [{f.ci_low:.3f},{f.ci_high:.3f}]" if f.ci_low is not None else "")


def _group_title(g: Group, first: Row) -> str:
    setting = (
        f"k = {g.k}; mode {first.mode}; {first.sample}; answerer {first.answerer}, judge {first.judge}; "
        f"{first.aggregation}"
    )
    return (
        f"k = {g.k}: main table ({setting})"
        if g.reason is None
        else f"k = {g.k}, apart: {g.reason}"
    )


def text(b: Board, metrics: Sequence[str] = SHOWN) -> str:
    """The board as the command line prints it: one table per group, 95% intervals in brackets."""
    if not b.groups:
        return f"benchmark {b.benchmark!r} has no evaluation yet"
    lines = [
        f"leaderboard of {b.benchmark!r}: latest evaluation of every system, ranked by {b.metric}; "
        "rows apart are not comparable with the main table (reason given)"
    ]
    for g in b.groups:
        lines += ["", _group_title(g, g.rows[0])]
        head = (
            f"{'#':>3} {'system':<16} {'mode':<10} "
            + " ".join(f"{m:<22}" for m in metrics)
            + f" {'offline':<26} evaluation / provenance"
        )
        lines += [head, "-" * len(head)]
        for r in g.rows:
            cells = " ".join(f"{_figure(r.metrics.get(m)):<22}" for m in metrics)
            lines.append(
                f"{r.rank if r.rank is not None else '-':>3} {r.system:<16} {r.mode:<10} {cells} "
                f"{(r.offline or '–'):<26} {r.eval_run_id} ({identity(r)})"
            )
            if r.sample != ALL_QUESTIONS and g.reason is None:
                lines.append(f"{'':>4}questions: {r.sample}")
            if r.changes:
                lines.append(
                    f"{'':>4}changed since its previous evaluation: {'; '.join(r.changes)}"
                )
            if b.protocol is not None:
                lines += [f"{'':>4}{line}" for line in protocol_lines(b.protocol, r)]
    return "\n".join(lines)


def _protocol_figure(p: Mapping[str, Any], metric: str) -> Figure:
    low, high = p.get(f"{metric}_ci") or (None, None)
    return Figure(value=p[metric], ci_low=low, ci_high=high, n=int(p.get("n") or 0))


def protocol_lines(protocol: str, row: Row) -> list[str]:
    """A row's protocol groups, one line each: ``locomo single-hop (n 40): f1 0.512 [0.44,0.58]``."""
    from clonemem.schemas.results import PROTOCOL_METRICS

    if not row.protocol:
        return [f"{protocol}: no rows (this evaluation did not compute the protocol)"]
    out = []
    for p in row.protocol:
        where = f"{p['group']}" + (f" {p['granularity']}@{p['k']}" if p.get("granularity") else "")
        figures = ", ".join(
            f"{m} {_figure(_protocol_figure(p, m))}" for m in PROTOCOL_METRICS if m in p
        )
        out.append(f"{protocol} {where} (n {p['n']}): {figures}")
    return out


def markdown(b: Board, metrics: Sequence[str] = SHOWN, link: str | None = None) -> str:
    """The board as Markdown (the Prefect artifact)."""
    if not b.groups:
        return f"Benchmark `{b.benchmark}` has no evaluation yet."
    out = [
        f"Latest evaluation of every system on `{b.benchmark}`, ranked by `{b.metric}` with 95% bootstrap "
        "intervals; rows that are not comparable with the main table stand apart with the reason."
    ]
    for g in b.groups:
        out += [
            "",
            f"### {_group_title(g, g.rows[0])}",
            "",
            "| # | system | mode | questions | "
            + " | ".join(metrics)
            + " | offline | evaluation | provenance "
            "| changed since previous |",
            "|" + "---|" * (8 + len(metrics)),
        ]
        for r in g.rows:
            out.append(
                f"| {r.rank if r.rank is not None else '–'} | {r.system} | {r.mode} | {r.sample} | "
                + " | ".join(_figure(r.metrics.get(m)) for m in metrics)
                + f" | {r.offline or '–'} | `{r.eval_run_id}` | {identity(r)} | "
                + ("; ".join(r.changes) or "–")
                + " |"
            )
    if link:
        out += ["", f"[Open the leaderboard in the dashboard]({link})"]
    return "\n".join(out)
