"""The leaderboard's pure logic (clonemem/evaluation/leaderboard.py) on plain rows: the latest evaluation
of each system whichever run made it, comparable rows ranked together and the others apart with the
reason, what changed between a system's evaluations (a remote server's version, the retrieval mode)
even with other evaluations in between, and labels that name exactly the offline roles."""

from __future__ import annotations

import datetime as dt
import json

import polars as pl

from clonemem.evaluation import leaderboard as L
from clonemem.schemas.results import Provenance, SystemProvenance

T0 = dt.datetime(2026, 11, 27, 15, 0, 0)


def prov(
    systems: dict[str, dict],
    judge: str = "offline/heuristic-judge",
    answerer: str = "offline/heuristic-clone",
) -> str:
    return Provenance(
        project_version="0.1",
        git_commit="abc",
        answerer=answerer,
        judge=judge,
        systems=[
            SystemProvenance(
                system=s, code_hash=p.get("code_hash", "h-" + s), extra=p.get("extra", {})
            )
            for s, p in systems.items()
        ],
    ).model_dump_json()


def ev(
    eid: str,
    minute: int,
    system: str,
    mode: str | None = "replay",
    content: str | None = "C1",
    sample: dict | None = None,
    extra: dict | None = None,
    judge: str = "offline/heuristic-judge",
    answerer: str = "offline/heuristic-clone",
    answers_offline: bool | None = None,
) -> dict:
    return {
        "eval_run_id": eid,
        "started_at": T0 + dt.timedelta(minutes=minute),
        "system": system,
        "retrieval_mode": mode,
        "content_hash": content,
        "sample_json": None if sample is None else json.dumps(sample),
        "provenance_json": prov({system: {"extra": extra or {}}}, judge=judge, answerer=answerer),
        "config_json": json.dumps({"systems": [system], "k": [5]}),
        "answers_offline": is_offline(answerer) if answers_offline is None else answers_offline,
    }


def is_offline(ref: str) -> bool:
    return ref.startswith("offline/")


def metrics(*rows: tuple[str, str, int, float]) -> pl.DataFrame:
    return pl.DataFrame(
        [
            {
                "eval_run_id": e,
                "system": s,
                "k": k,
                "group_value": "all",
                "metric": "recall_flat",
                "n": 100,
                "value": v,
                "ci_low": v - 0.05,
                "ci_high": v + 0.05,
            }
            for e, s, k, v in rows
        ]
    )


def frame(*rows: dict) -> pl.DataFrame:
    return pl.DataFrame(list(rows))


def test_the_latest_evaluation_of_each_system_whichever_run_made_it_in_one_table() -> None:
    rows = L.evaluated(
        frame(
            ev("builtins", 0, "bm25"),
            ev("builtins", 0, "random"),
            ev("alone", 10, "mine", extra={"url": "http://127.0.0.1:1", "version": "0.1.0"}),
            ev("file", 20, "from_file", extra={"file": "r.jsonl", "sha256": "ff"}),
        )
    )
    got = L.board(
        "demo",
        rows,
        metrics(
            ("builtins", "bm25", 5, 0.25),
            ("builtins", "random", 5, 0.05),
            ("alone", "mine", 5, 0.22),
            ("file", "from_file", 5, 0.25),
        ),
    )
    assert len(got.groups) == 1 and got.groups[0].reason is None
    table = {r.system: r for r in got.groups[0].rows}
    assert set(table) == {"bm25", "random", "mine", "from_file"}
    assert table["mine"].eval_run_id == "alone" and table["from_file"].eval_run_id == "file"
    assert [r.rank for r in got.groups[0].rows] == [1, 1, 3, 4]  # ties share the better rank
    assert (
        table["mine"].provenance["extra"]["version"] == "0.1.0" and table["bm25"].mode == "replay"
    )
    assert table["bm25"].metrics["recall_flat"].ci_low == 0.2


def test_a_later_evaluation_of_a_system_replaces_its_row() -> None:
    rows = L.evaluated(frame(ev("first", 0, "bm25"), ev("second", 5, "bm25")))
    got = L.board("demo", rows, metrics(("first", "bm25", 5, 0.3), ("second", "bm25", 5, 0.2)))
    assert [
        (r.eval_run_id, r.metrics["recall_flat"].value) for g in got.groups for r in g.rows
    ] == [("second", 0.2)]


def test_rows_that_are_not_comparable_stand_apart_with_the_reason() -> None:
    rows = L.evaluated(
        frame(
            ev("a", 0, "bm25"),
            ev("a", 0, "random"),
            ev("a", 0, "dense"),
            ev("b", 1, "mem0", mode="in_process"),
            ev(
                "c",
                2,
                "quick",
                sample={"kind": "sample", "n": 50, "seed": 1, "questions": 50, "of": 300},
            ),
            ev("d", 3, "live", judge="openai/gpt-4o-mini", answerer="openai/gpt-4o-mini"),
            ev("e", 4, "old", content="C0"),
        )
    )
    got = L.board(
        "demo",
        rows,
        metrics(
            ("a", "bm25", 5, 0.3),
            ("a", "random", 5, 0.1),
            ("a", "dense", 5, 0.2),
            ("b", "mem0", 5, 0.4),
            ("c", "quick", 5, 0.5),
            ("d", "live", 5, 0.6),
            ("e", "old", 5, 0.7),
        ),
    )
    main, *apart = got.groups
    assert main.reason is None and [r.system for r in main.rows] == ["bm25", "dense", "random"]
    reasons = {g.rows[0].system: g.reason for g in apart}
    assert reasons["mem0"] == "retrieval mode in_process (main table: replay)"
    assert reasons["quick"] == "questions sample 50/300 seed 1 (main table: all questions)"
    assert "answerer openai/gpt-4o-mini (main table: offline/heuristic-clone)" in reasons["live"]
    assert "judge openai/gpt-4o-mini" in reasons["live"]
    assert reasons["old"] == "benchmark content C0 (main table: C1)"
    assert all(
        len(g.rows) == 1 and g.rows[0].rank == 1 for g in apart
    )  # never ranked with the main table


def test_each_k_is_its_own_table_and_k_picks_one() -> None:
    rows = L.evaluated(frame(ev("a", 0, "bm25")))
    m = metrics(("a", "bm25", 5, 0.3), ("a", "bm25", 10, 0.4))
    assert [(g.k, g.reason) for g in L.board("demo", rows, m).groups] == [(5, None), (10, None)]
    assert [g.k for g in L.board("demo", rows, m, k=10).groups] == [10]


def test_a_server_version_change_is_marked_even_with_other_evaluations_between() -> None:
    """The label `mine` pointed at another server version, with the built-ins evaluated in between:
    comparing consecutive evaluations (the old History) saw no change; per system it is one."""
    rows = L.evaluated(
        frame(
            ev("m1", 0, "mine", extra={"url": "http://h:1", "name": "mine", "version": "0.1.0"}),
            ev("b1", 5, "bm25", mode="in_process"),
            ev(
                "m2",
                10,
                "mine",
                extra={"url": "http://h:1", "name": "mine", "version": "0.1.0+boundary"},
            ),
            ev("b2", 15, "bm25", mode="replay"),
        )
    )
    changes = L.system_changes(rows)
    assert changes.select("eval_run_id", "system", "changes").rows() == [
        ("m2", "mine", "extra version: 0.1.0 → 0.1.0+boundary"),
        ("b2", "bm25", "retrieval mode: in_process → replay"),
    ]
    got = L.board("demo", rows, metrics(("m2", "mine", 5, 0.18), ("b2", "bm25", 5, 0.24)))
    assert {r.system: r.changes for g in got.groups for r in g.rows} == {
        "mine": ["extra version: 0.1.0 → 0.1.0+boundary"],
        "bm25": ["retrieval mode: in_process → replay"],
    }


def test_an_unrecorded_field_is_no_change_and_no_mode_is_ranked_with_a_known_one() -> None:
    rows = L.evaluated(frame(ev("old", 0, "bm25", mode=None, content=None), ev("new", 5, "bm25")))
    assert L.system_changes(rows).height == 0
    both = L.evaluated(frame(ev("old", 0, "random", mode=None), ev("new", 5, "bm25")))
    got = L.board("demo", both, metrics(("old", "random", 5, 0.1), ("new", "bm25", 5, 0.3)))
    assert [g.reason for g in got.groups] == [
        None,
        "retrieval mode not recorded (main table: replay)",
    ]


def test_labels_name_exactly_the_offline_roles() -> None:
    assert L.offline_label(False, True) == "offline judge"
    assert L.offline_label(True, False) == "offline answerer"
    assert L.offline_label(True, True) == "offline answerer and judge"
    assert L.offline_label(False, False) is None
    rows = L.evaluated(
        frame(ev("a", 0, "bm25", answerer="openai/gpt-4o-mini", judge="offline/heuristic-judge"))
    )
    (row,) = L.board("demo", rows, metrics(("a", "bm25", 5, 0.3))).groups[0].rows
    assert row.offline == "offline judge"


def test_the_evaluation_summary_names_exactly_the_offline_roles() -> None:
    """`evaluate`'s printed table said "offline answerer/judge" when only the judge was offline."""
    from clonemem.evaluation.report import leaderboard, models_label
    from clonemem.schemas.results import EvaluationResult

    def result(answerer: str, judge: str) -> EvaluationResult:
        return EvaluationResult(
            benchmark="demo",
            benchmark_id="b",
            eval_run_id="e",
            offline=True,
            results=[],
            by_question_type=[],
            provenance=Provenance(answerer=answerer, judge=judge),
        )

    live_answerer = result("openai/gpt-4o-mini", "offline/judge")
    assert models_label(live_answerer) == "offline judge"
    assert leaderboard(live_answerer).startswith("benchmark demo (offline judge);")
    assert models_label(result("offline/answerer", "openai/gpt-4o-mini")) == "offline answerer"
    assert models_label(result("offline/answerer", "offline/judge")) == "offline answerer and judge"
