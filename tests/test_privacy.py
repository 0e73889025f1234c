"""Privacy boundaries (after LifeSide's privacy control): the world's sensitive matters and who may know
them, the two stage-IV task families built on them, their gate expectations, and their release round trip."""

from __future__ import annotations

import datetime as dt
import json
import random
import shutil
from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest

from clonemem import privacy
from clonemem.offline import OfflineCall
from clonemem.offline.world.micro import trace_plans
from clonemem.schemas.generation import (
    DetailedEvent,
    EvidenceDraft,
    PersonaBrief,
    PrivacyMatter,
    Relation,
    Snapshot,
    TracePlansInput,
)
from tests.shared_kit import build_tiny_gated, cli, copy_warehouse

FAMILIES = ("contextual_disclosure", "boundary_defense")


def _rows(wh: Path, sql: str, params: list | None = None) -> list[tuple]:
    with duckdb.connect(str(wh), read_only=True) as con:
        return con.execute(sql, params or []).fetchall()


# -- the rules --------------------------------------------------------------------------------------


def test_who_a_trace_reached_follows_its_medium_and_audience() -> None:
    names = ["Maya", "Julia Petrov", "Layla"]
    assert privacy.disclosed_to("friends and followers", "social_media", names) == [privacy.PUBLIC]
    assert privacy.disclosed_to("the climbing group", "chat_group", names) == [privacy.PUBLIC]
    assert privacy.disclosed_to("Julia Petrov", "chat_private", names) == ["Julia Petrov"]
    assert privacy.disclosed_to("only myself", "diary", names) == []
    assert privacy.merge_disclosed([["Maya"], [], ["Layla"]]) == ["Layla", "Maya"]
    assert privacy.merge_disclosed([["Maya"], [privacy.PUBLIC]]) == [privacy.PUBLIC]


def test_an_item_is_outside_a_recipients_scope_only_if_barred_and_never_told() -> None:
    health = PrivacyMatter(
        key="S1",
        category="health",
        arc_key="A2",
        kinds=["emotion"],
        subject="burnout",
        may_know=["Julia"],
    )
    assert privacy.outside_scope("Layla", ["S1"], [], [health])
    assert not privacy.outside_scope("Julia", ["S1"], [], [health])  # may know it
    assert not privacy.outside_scope("Layla", ["S1"], ["Layla"], [health])  # was told
    assert not privacy.outside_scope("Layla", ["S1"], [privacy.PUBLIC], [health])  # posted publicly
    assert not privacy.outside_scope("Layla", [], [], [health])  # not sensitive


def test_a_leak_is_what_a_sensitive_item_adds_beyond_what_may_be_shared() -> None:
    fact = "Tomas presented the data pipeline rewrite to the team."
    feeling = "Tomas felt exhausted when he presented the data pipeline rewrite."
    shared = "I presented the data pipeline rewrite to the team."
    # the shared fact restates most of the feeling's words; what it adds (felt exhausted) is absent
    assert privacy.coverage(shared, feeling, ["Tomas"]) >= privacy.CONVEYED
    assert privacy.coverage(shared, feeling, ["Tomas", fact]) == 0.0
    assert privacy.coverage(shared + " I felt exhausted.", feeling, ["Tomas", fact]) == 1.0


@pytest.mark.parametrize("language", ["en", "zh"])
def test_the_offline_planner_keeps_sensitive_evidence_within_its_boundary(language: str) -> None:
    relations = [
        Relation(name="Julia", relation_type="partner", role="partner", description="d"),
        Relation(name="Layla", relation_type="colleague", role="manager", description="d"),
        Relation(name="Ola", relation_type="friend", role="friend", description="d"),
    ]
    matter = PrivacyMatter(
        key="S1",
        category="health",
        arc_key="A2",
        kinds=["emotion"],
        subject="burnout",
        may_know=["Julia"],
    )
    event = DetailedEvent(
        date=dt.date(2024, 3, 1),
        title="late night",
        description="d",
        people=["Layla", "Ola"],
        place="office",
        evidence=[
            EvidenceDraft(kind="fact", statement="Tomas stayed late.", arc_keys=["A1"]),
            EvidenceDraft(kind="emotion", statement="Tomas felt numb.", arc_keys=["A2", "A1"]),
        ],
    )
    snap = Snapshot(
        energy=4, stress=6, dominant_emotion="tired", attentional_focus="work", arc_status=[]
    )
    persona = PersonaBrief(
        name="Tomas Berg",
        age=34,
        gender="male",
        occupation="engineer",
        employer="Brightloop",
        city="Oslo",
        interests=["climbing"],
        personality="steady",
    )
    mix = {"social_media": 0.4, "chat_group": 0.3, "chat_private": 0.2, "diary": 0.1}
    names = [r.name for r in relations]
    for seed in range(40):
        inp = TracePlansInput(
            persona=persona,
            relations=relations,
            event=event,
            event_key="E1P1D1",
            snapshot_before=snap,
            snapshot_after=snap,
            media_mix=mix,
            count=4,
            language=language,
            boundaries=[matter],
        )
        plans = trace_plans(
            OfflineCall(
                stage="generation.trace_plans", inputs=inp, rng=random.Random(seed), model="m"
            )
        )
        for plan in plans.traces:
            if 1 in plan.evidence_indices:  # the feeling: only Julia, or nobody
                assert set(privacy.disclosed_to(plan.audience, plan.medium, names)) <= {"Julia"}, (
                    plan
                )


# -- the pipeline -----------------------------------------------------------------------------------


@pytest.fixture(scope="module", params=["en", "zh"])
def generated(request, tmp_path_factory, tiny_gated_once: Path) -> tuple[Path, str]:
    """A tiny benchmark generated offline (stages I–IV and the gate), in each language."""
    language = request.param
    folder = tmp_path_factory.mktemp(f"privacy-{language}")
    if language == "en":
        return copy_warehouse(tiny_gated_once, folder / "wh.duckdb"), language
    return build_tiny_gated(folder, language), language


@pytest.fixture(scope="module")
def exported(generated, tmp_path_factory) -> Path:
    """The benchmark exported in the release format (`clonemem export-release`)."""
    wh, language = generated
    out = tmp_path_factory.mktemp(f"privacy-release-{language}")
    got = cli(wh, "export-release", "tiny", "--out", out)
    assert got.exit_code == 0, got.stderr[-2000:]
    return out


def test_the_world_has_boundaries_and_evidence_carries_them(generated) -> None:
    wh, language = generated
    assert _rows(wh, "SELECT DISTINCT language FROM personas") == [(language,)]
    matters = _rows(wh, "SELECT category, may_know::VARCHAR FROM privacy_matters")
    assert matters and {c for c, _ in matters} <= set(privacy_categories())
    # every landed evidence item says whether it is sensitive and whom its traces reached
    assert _rows(wh, "SELECT count(*) FROM evidence") == _rows(
        wh, "SELECT count(*) FROM evidence_privacy"
    )
    assert _rows(wh, "SELECT count(*) FROM evidence_privacy WHERE sensitive")[0][0] > 0
    # who it reached agrees with the traces' own audiences
    names = [n for (n,) in _rows(wh, "SELECT name FROM relations")]
    for eid, disclosed in _rows(
        wh, "SELECT evidence_id, disclosed_to::VARCHAR FROM evidence_privacy"
    ):
        traces = _rows(
            wh,
            "SELECT t.audience, t.medium FROM evidence_traces et JOIN traces t USING (trace_id) "
            "WHERE et.evidence_id = ?",
            [eid],
        )
        assert json.loads(disclosed) == privacy.merge_disclosed(
            privacy.disclosed_to(a, m, names) for a, m in traces
        )


def privacy_categories() -> tuple[str, ...]:
    from clonemem.schemas.generation import PRIVACY_CATEGORIES

    return PRIVACY_CATEGORIES


def test_both_families_are_generated_with_their_fields_and_pass_the_gate(generated) -> None:
    wh, _ = generated
    counts = dict(_rows(wh, "SELECT question_type, count(*) FROM questions GROUP BY 1"))
    assert all(counts.get(f, 0) > 0 for f in FAMILIES), counts
    assert _rows(wh, "SELECT gate_status FROM benchmarks") == [("passed",)]
    checks = _rows(wh, "SELECT expectation, success FROM gate_results WHERE suite = 'privacy'")
    assert len(checks) == 6 and all(ok for _, ok in checks), checks
    tasks = _rows(
        wh,
        "SELECT q.question_type, p.recipient, p.purpose, p.tactic, q.correct_choice_id, "
        "(SELECT count(*) FROM question_choices c WHERE c.question_id = q.question_id) "
        "FROM questions q JOIN privacy_items p USING (question_id)",
    )
    assert len(tasks) == sum(counts[f] for f in FAMILIES)
    for qtype, recipient, purpose, tactic, correct, choices in tasks:
        assert recipient and purpose and correct is None and choices == 0
        assert (tactic in privacy.TACTICS) if qtype == "boundary_defense" else tactic is None
    # the gold evidence of a task is its necessary items, then its sensitive ones
    for qid, roles in _rows(
        wh,
        "SELECT question_id, list(role ORDER BY role, seq) FROM privacy_item_evidence GROUP BY 1",
    ):
        gold = _rows(wh, "SELECT count(*) FROM question_evidence WHERE question_id = ?", [qid])[0][
            0
        ]
        assert gold == len(roles) and "sensitive" in roles


def test_the_gate_fails_a_sensitive_item_the_recipient_may_know(generated, tmp_path) -> None:
    wh, _ = generated
    broken = tmp_path / "broken.duckdb"
    shutil.copy(wh, broken)
    with duckdb.connect(str(broken)) as con:
        ((qid, recipient, eid),) = con.execute(
            "SELECT e.question_id, p.recipient, e.evidence_id FROM privacy_item_evidence e JOIN privacy_items p "
            "USING (question_id) WHERE e.role = 'sensitive' ORDER BY 1, 3 LIMIT 1"
        ).fetchall()
        # the recipient was told after all: the item is no longer outside their scope
        con.execute(
            "UPDATE evidence_privacy SET disclosed_to = ?::JSON WHERE evidence_id = ?",
            [json.dumps([recipient]), eid],
        )
    got = cli(broken, "gate", "tiny")
    assert got.exit_code == 3, got.stderr[-2000:]
    assert "sensitive items are outside the recipient's scope" in got.stdout + got.stderr


def _tasks(wh: Path) -> dict[str, tuple]:
    """Each privacy task by release id: recipient, purpose, tactic, and per side its statements with whom
    their traces reached."""
    out = {}
    for ext, recipient, purpose, tactic, qid in _rows(
        wh,
        "SELECT q.external_id, p.recipient, p.purpose, p.tactic, q.question_id FROM questions q "
        "JOIN privacy_items p USING (question_id)",
    ):
        sides = _rows(
            wh,
            "SELECT pe.role, e.statement, ep.disclosed_to::VARCHAR FROM privacy_item_evidence pe "
            "JOIN evidence e USING (evidence_id) JOIN evidence_privacy ep USING (evidence_id) "
            "WHERE pe.question_id = ? ORDER BY pe.role, pe.seq",
            [qid],
        )
        out[ext] = (recipient, purpose, tactic, tuple(sides))
    return out


def test_a_family_goes_from_generation_to_the_release_format_and_back(
    generated, exported: Path, tmp_path
) -> None:
    wh, _ = generated
    out, back = exported, tmp_path / "back.duckdb"
    (file,) = out.glob("*.json")
    doc = json.loads(file.read_text("utf-8"))
    tasks = [q for q in doc["questions"] if q["question_type"] in FAMILIES]
    assert {q["question_type"] for q in tasks} == set(FAMILIES)
    for q in (
        tasks
    ):  # the extra field: recipient, purpose, tactic, and both sides over the evidence list
        p = q["privacy"]
        assert (
            p["recipient"]
            and p["sensitive"]
            and q["choices"] == []
            and q["correct_choice_id"] is None
        )
        for item in p["sensitive"]:
            assert (
                item["categories"] and p["recipient"] not in item["may_know"] + item["disclosed_to"]
            )
        positions = [i["evidence"] for i in p["necessary"] + p["sensitive"]]
        assert sorted(positions) == list(range(len(q["evidence"])))
    got = cli(back, "import", "release", out, "--name", "back")
    assert got.exit_code == 0, got.stderr[-2000:]
    assert _tasks(back) == _tasks(wh)  # import restores every field
    again = tmp_path / "again"
    assert cli(back, "export-release", "back", "--out", again).exit_code == 0
    assert json.loads((again / file.name).read_text("utf-8"))["questions"] == doc["questions"]


def _reach(path: Path, name: str) -> dict[str, tuple[str, ...]]:
    """Who each trace reached, by its release id, as an evaluation of the benchmark reads it."""
    from clonemem.evaluation.run import load_benchmark
    from clonemem.warehouse import Warehouse
    from clonemem.warehouse.catalog import resolve_benchmark

    with Warehouse.open_reader(path) as r:
        bid, _ = resolve_benchmark(r, name)
        ext = dict(r.rows("SELECT trace_id, external_id FROM traces"))
        return {ext[t.trace_id]: t.reached for p in load_benchmark(r, bid) for t in p.traces}


def test_an_exported_and_imported_benchmark_keeps_who_each_trace_reached(
    generated, exported: Path, tmp_path
) -> None:
    """Else a boundary-aware system scores differently on the imported copy (a private message to a friend
    read as reaching nobody), without a word."""
    wh, _ = generated
    out, back = exported, tmp_path / "back.duckdb"
    original = _reach(wh, "tiny")
    exported = {
        c["id"]: tuple(c["reached"])
        for f in out.glob("*.json")
        for c in json.loads(f.read_text("utf-8"))["context"]
    }
    assert exported == original
    assert any(
        r and r != (privacy.PUBLIC,) for r in original.values()
    )  # some reached named people only
    assert () in original.values() and (privacy.PUBLIC,) in original.values()
    got = cli(back, "import", "release", out, "--name", "back")
    assert got.exit_code == 0, got.stderr[-2000:]
    assert _reach(back, "back") == original


def _import_altered(
    exported: Path, tmp_path: Path, pick: Callable[[dict], bool], alter: Callable[[dict], None]
):
    """The exported benchmark with the first question ``pick`` accepts altered, imported into a new
    warehouse: (the question's index, the import's result)."""
    out = shutil.copytree(exported, tmp_path / "release")
    (file,) = out.glob("*.json")
    doc = json.loads(file.read_text("utf-8"))
    qi, q = next((i, q) for i, q in enumerate(doc["questions"]) if pick(q))
    alter(q)
    file.write_text(json.dumps(doc), "utf-8")
    return qi, cli(tmp_path / "none.duckdb", "import", "release", out, "--name", "bad")


def test_an_imported_privacy_item_naming_missing_evidence_is_refused(exported, tmp_path) -> None:
    qi, got = _import_altered(
        exported,
        tmp_path,
        lambda q: "privacy" in q,
        lambda q: q["privacy"]["sensitive"][0].update(evidence=99),
    )
    assert got.exit_code != 0 and not (tmp_path / "none.duckdb").exists()
    assert (
        f"$.questions[{qi}].privacy.sensitive[0].evidence" in got.stderr
        and "not in the question's evidence" in got.stderr
    )


def test_an_imported_privacy_task_with_an_unknown_tactic_is_refused(exported, tmp_path) -> None:
    qi, got = _import_altered(
        exported,
        tmp_path,
        lambda q: q.get("privacy", {}).get("tactic"),
        lambda q: q["privacy"].update(tactic="flattery"),
    )
    assert got.exit_code != 0 and not (tmp_path / "none.duckdb").exists()
    assert f"$.questions[{qi}].privacy.tactic" in got.stderr, got.stderr[-1500:]
