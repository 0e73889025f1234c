"""Question types are declared once (clonemem.schemas.question_types); everything else reads the declaration."""

from __future__ import annotations

import datetime as dt

import pytest

from clonemem import prompts
from clonemem.exporters.release import export_release
from clonemem.importers.locomo import project_type
from clonemem.offline.world.qa import qa_lexicon
from clonemem.qa.pipeline import run_item
from clonemem.schemas import question_types
from clonemem.schemas.config import RunConfig
from clonemem.schemas.question_types import QuestionTypeSpec


def test_the_paper_types_in_their_order() -> None:
    # the paper's eight types, then the two privacy task families (after LifeSide)
    assert question_types.names() == (
        "single_point_factual",
        "comparison",
        "trajectory",
        "pattern",
        "causal",
        "counterfactual",
        "inferential",
        "unanswerable",
        "contextual_disclosure",
        "boundary_defense",
    )
    assert question_types.privacy_types() == ("contextual_disclosure", "boundary_defense")
    assert question_types.abstaining() == ("unanswerable",)
    assert project_type(None, "inference") == "inferential"
    with pytest.raises(ValueError, match="question_types"):
        RunConfig.model_validate({"qa": {"question_types": {"gossip": 1}}})


@pytest.mark.parametrize("name", question_types.names())
def test_every_type_is_complete(name: str) -> None:
    spec = question_types.spec(name)
    assert callable(spec.offline_selector())  # the offline handler it declares exists
    assert spec.min_evidence >= (2 if spec.multi_point else 1)
    for language in ("en", "zh"):  # the offline writer has wording for it in both languages
        qa = qa_lexicon(language)
        assert qa["questions"][name] and qa["answers"][name]


def _segment():
    from clonemem.schemas.generation import PersonaBrief, Relation
    from clonemem.schemas.qa import ArcView, Segment, SegmentEvidence

    def ev(i: int, day: dt.date, kind: str, statement: str) -> SegmentEvidence:
        return SegmentEvidence(
            evidence_id=f"e{i}",
            date=day,
            kind=kind,
            statement=statement,
            trace_ids=[f"t{i}"],
            last_trace_at=dt.datetime.combine(day, dt.time(21)),
        )

    evidence = [
        ev(1, dt.date(2024, 1, 10), "fact", "Mia joined the Harbor climbing club."),
        ev(2, dt.date(2024, 3, 2), "emotion", "Mia felt proud after her first lead climb."),
        ev(3, dt.date(2024, 5, 20), "opinion", "Mia thinks climbing taught her patience."),
    ]
    return Segment(
        segment_id="seg-1",
        persona=PersonaBrief(
            name="Mia Lund",
            age=31,
            gender="female",
            occupation="nurse",
            employer="City Hospital",
            city="Oslo",
            interests=["climbing"],
            personality="steady",
        ),
        relations=[
            Relation(name="Ola", relation_type="friend", role="climbing partner", description="d")
        ],
        arc=ArcView(
            key="a1",
            dimension="experience",
            theme="climbing",
            title="Learning to climb",
            states=["novice", "confident"],
        ),
        other_arcs=[],
        window_index=3,
        window_start=dt.date(2024, 5, 1),
        window_end=dt.date(2024, 5, 31),
        evidence=evidence,
        new_evidence_ids=["e3"],
        timeline_end=dt.date(2024, 12, 31),
        language="en",
    )


def test_prompts_carry_the_definition_and_the_abstention_rule() -> None:
    from clonemem.schemas.qa import PlanInput, QAPlan, WriteInput

    seg = _segment()
    plan = QAPlan(
        feasible=True,
        reason="r",
        evidence_ids=[seg.evidence[0].evidence_id],
        temporal_scope="s",
        outline="o",
    )
    for name in question_types.names():
        spec = question_types.spec(name)
        planned = prompts.render(
            "qa_plan", inp=PlanInput(segment=seg, question_type=name), language_name="English"
        )
        assert spec.definition in planned.user
        written = prompts.render(
            "qa_write",
            inp=WriteInput(
                segment=seg, question_type=name, plan=plan, question_time=dt.datetime(2024, 1, 1)
            ),
            language_name="English",
        )
        assert ("cannot be known from them" in written.user) is spec.abstains


def test_the_pipeline_enforces_a_types_evidence_minimum(monkeypatch) -> None:
    from clonemem.qa import stages as Q
    from clonemem.schemas.qa import QAPlan

    seg = _segment()
    one = QAPlan(
        feasible=True,
        reason="r",
        evidence_ids=[seg.evidence[-1].evidence_id],
        temporal_scope="s",
        outline="o",
    )

    def run(stage, _inp):
        assert stage is Q.PLAN, "nothing after the plan may run for an item that cites too little"
        return one

    got = run_item(seg, "comparison", 2, run)
    assert (got.status, got.rejected_stage) == ("rejected", "format")
    assert "needs at least 2 evidence items; the plan cites 1" in got.rejected_reason


def test_a_new_type_is_one_declaration(monkeypatch) -> None:
    """A type declared at run time is planned offline through its own selector and asks for its own count
    of distractors; nothing else needs listing it (its wording comes from the lexicon)."""
    from clonemem.offline.world import qa as offline_qa

    spec = QuestionTypeSpec(
        "habit_probe",
        "temporal",
        "Probe a habit.",
        min_evidence=1,
        multi_point=False,
        abstains=True,
        offline_evidence="clonemem.offline.world.qa:select_unanswerable",
    )
    with question_types.declared(spec):
        assert question_types.spec("habit_probe").distractor_count == 4
        seg = _segment()
        chosen, why = question_types.spec("habit_probe").offline_selector()(seg)
        assert chosen == offline_qa.select_unanswerable(seg)[0] and why == ""


HABIT = QuestionTypeSpec(
    "habit_probe",
    "temporal",
    "Ask whether a way the person acts recurs, citing two moments.",
    min_evidence=2,
    multi_point=True,
    offline_evidence="clonemem.offline.world.qa:select_pattern",
    dimensions=("experience",),
    offline_questions={
        "en": ("{first}, does that {topic} thing keep coming back, from {month1} to {month2}?",)
    },
    offline_answer={"en": "It keeps coming back. {s1} And later: {s2}"},
)


@pytest.mark.slow
@pytest.mark.prefect
def test_a_toy_type_declared_in_a_test_goes_through_qa_and_the_gate(tmp_path) -> None:
    """The recipe of docs/architecture.md, "add a question type": one declaration. Segments, the QA
    pipeline, the offline writer, the gate, the metrics and the export take it from there."""
    import json
    import tomllib

    from clonemem.flows.pipeline import pipeline_flow
    from clonemem.warehouse import Warehouse
    from tests.pipeline_kit import TINY

    wh = tmp_path / "wh.duckdb"
    with question_types.declared(HABIT):
        cfg = RunConfig.model_validate(
            {
                **tomllib.loads(TINY.replace("{personas}", "1")),
                "name": "toy",
                "qa": {"types_per_segment": 9, "distractor_rounds": 2},
            }
        )
        got = pipeline_flow(str(wh), cfg, systems=["bm25", "oracle"], ks=[3])
        assert got.gate_status == "passed"
        assert got.qa.by_type.get("habit_probe", 0) > 0
        with Warehouse.open_reader(wh) as r:
            dims = {
                d
                for (d,) in r.rows(
                    "SELECT DISTINCT dimension FROM questions WHERE question_type = 'habit_probe'"
                )
            }
            cited = r.rows(
                "SELECT min(n) FROM (SELECT count(*) AS n FROM question_evidence JOIN questions USING "
                "(question_id) WHERE question_type = 'habit_probe' GROUP BY question_id)"
            )[0][0]
            known = {
                k
                for (k,) in r.rows(
                    "SELECT DISTINCT question_type_known FROM questions "
                    "WHERE question_type = 'habit_probe'"
                )
            }
            files = export_release(r, "toy", tmp_path / "out")
        assert dims == {"experience"} and cited >= 2  # its dimensions and its evidence minimum hold
        assert known == {True}  # landed as a declared type, not as an unknown one
        assert {e.question_type for e in got.evaluation.by_question_type} >= {"habit_probe"}
        exported = json.loads(files[0].read_text("utf-8"))["questions"]
        assert any(q["question_type"] == "habit_probe" for q in exported)
    assert "habit_probe" not in question_types.names()
