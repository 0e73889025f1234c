"""The standard protocols in an evaluation: a LoCoMo benchmark is scored by LoCoMo's and mem0's
protocols without being asked (its importer declares them), `[evaluation] protocols` turns them off
or changes them, the rows land in the warehouse with their protocol's name and version, and another
harness's predictions in LoCoMo's layout score exactly what LoCoMo's and mem0's rules give (computed
by hand below)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clonemem.importers import import_files
from clonemem.schemas.config import RunConfig
from clonemem.schemas.results_file import ResultsFileError
from clonemem.warehouse import Warehouse
from clonemem.warehouse.protocols import protocol_rows

pytestmark = pytest.mark.prefect

MINI = Path(__file__).parent / "fixtures" / "locomo" / "conv-mini.json"
EVAL_TABLES = (
    "eval_runs",
    "eval_protocol_scores",
    "eval_protocol_answers",
    "eval_protocol_metrics",
)


@pytest.fixture(scope="module")
def mini(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("protocols") / "wh.duckdb"
    with Warehouse.open_writer(path) as wh:
        import_files(wh, "locomo", [MINI], "mini")
    return path


@pytest.fixture(scope="module")
def evaluated(mini: Path):
    from clonemem.flows.evaluation import evaluate_flow

    return evaluate_flow(str(mini), "mini", ["bm25"], [5], force=True, config=RunConfig())


def _config(protocols: list[str] | None) -> RunConfig:
    return RunConfig.model_validate({"evaluation": {"protocols": protocols}})


def test_a_locomo_benchmark_is_scored_by_its_protocols_without_asking(
    evaluated, mini: Path
) -> None:
    rows = {(r.protocol, r.group): r for r in evaluated.protocols}
    # the mini conversation: q0 multi-hop, q1 temporal, q2 and q6 open-domain, q3 single-hop, q4 q5
    # adversarial
    assert {g: (r.category, r.n) for (p, g), r in rows.items() if p == "locomo"} == {
        "multi-hop": (1, 1),
        "temporal": (2, 1),
        "open-domain": (3, 2),
        "single-hop": (4, 1),
        "adversarial": (5, 2),
        "overall": (None, 5),
        "overall_with_adversarial": (None, 7),
    }
    # mem0 leaves the adversarial category out
    assert {g for p, g in rows if p == "mem0"} == {
        "multi-hop",
        "temporal",
        "open-domain",
        "single-hop",
        "overall",
    }
    assert all(
        r.f1 is not None and r.bleu1 is not None and r.judge is not None
        for (p, _), r in rows.items()
        if p == "mem0"
    )
    dumped = evaluated.model_dump(mode="json")["protocols"]
    assert {"protocol", "system", "k", "group", "n", "f1", "f1_ci"} <= set(dumped[0])
    with Warehouse.open_reader(mini) as wh:
        stored = [
            r.model_copy(update={"eval_run_id": None})
            for r in protocol_rows(wh, evaluated.eval_run_id)
        ]
        versions = wh.rows(
            "SELECT DISTINCT protocol, protocol_version FROM eval_protocol_scores ORDER BY 1"
        )
        adversarial = wh.rows(
            "SELECT a.answer_text, s.value FROM eval_protocol_answers a "
            "JOIN eval_protocol_scores s USING (eval_run_id, protocol, system, k, question_id) "
            "JOIN questions q USING (question_id) "
            "WHERE a.eval_run_id = ? AND a.protocol = 'locomo' AND q.source_category = '5'",
            [evaluated.eval_run_id],
        )
    assert sorted(stored, key=repr) == sorted(evaluated.protocols, key=repr)
    assert versions == [("locomo", "1"), ("mem0", "1")]
    # category 5 scores 1 exactly for an answer saying it was not mentioned (the offline answerer's
    # phrase)
    assert all(value == float("not mentioned" in answer.lower()) for answer, value in adversarial)


def test_the_config_turns_protocols_off_or_changes_them(mini: Path) -> None:
    from clonemem.flows.evaluation import evaluate_flow

    off = evaluate_flow(str(mini), "mini", ["oracle"], [3], force=True, config=_config([]))
    assert off.protocols == []
    only = evaluate_flow(str(mini), "mini", ["oracle"], [3], force=True, config=_config(["-mem0"]))
    assert {r.protocol for r in only.protocols} == {"locomo"}


PREDICTIONS = {
    0: "pottery, running",
    1: "27 June 2023",
    2: "yes",
    3: "3",
    4: "Not mentioned",
    5: "He ate pasta",
    6: "No",
}


def _predictions(tmp_path: Path, drop: int | None = None) -> Path:
    doc = json.loads(MINI.read_text())
    doc["sample_id"] = "conv-mini"
    for i, qa in enumerate(doc["qa"]):
        if i != drop:
            qa["gpt-4_prediction"] = PREDICTIONS[i]
    out = tmp_path / "locomo_predictions.json"
    out.write_text(json.dumps([doc]))
    return out


def test_predictions_in_locomo_layout_score_as_locomo_and_mem0_do(
    mini: Path, tmp_path: Path
) -> None:
    from clonemem.flows.results_file import evaluate_results_file_flow

    scored = evaluate_results_file_flow(
        str(mini),
        "mini",
        str(_predictions(tmp_path)),
        "gpt4-run",
        force=True,
        config=RunConfig(),
        predictions_format="locomo",
        key="gpt-4_prediction",
    )
    rows = {(r.protocol, r.group): r for r in scored.evaluation.protocols}
    # LoCoMo (stemmed bag F1; multi-hop split on commas; category 5 phrases):
    #  q0 [potteri | run] vs [potteri run]: each part P 1, R 1/2 -> 2/3
    #  q1 [27 june 2023] vs [sunday befor 27 june 2023]: P 1, R 3/5 -> 3/4
    # q2 [ye] vs [like ye she make potteri]: P 1, R 1/5 -> 1/3;  q3 "3" = "3" -> 1;  q6 "no" = "no"
    # -> 1
    #  q4 "Not mentioned" -> 1;  q5 "He ate pasta" -> 0
    assert rows[("locomo", "multi-hop")].f1 == pytest.approx(2 / 3)
    assert rows[("locomo", "temporal")].f1 == pytest.approx(0.75)
    assert rows[("locomo", "open-domain")].f1 == pytest.approx((1 / 3 + 1) / 2)
    assert rows[("locomo", "adversarial")].f1 == pytest.approx(0.5)
    assert rows[("locomo", "overall")].f1 == pytest.approx((2 / 3 + 3 / 4 + 1 / 3 + 1 + 1) / 5)
    assert rows[("locomo", "overall_with_adversarial")].f1 == pytest.approx(
        (2 / 3 + 3 / 4 + 1 / 3 + 1 + 1 + 1) / 7
    )
    # mem0 (set F1, no stemming): q0 {pottery running} vs {pottery and running}: P 1, R 2/3 -> 4/5
    # q1 {27 june 2023} vs {the sunday before 27 june 2023}: P 1, R 1/2 -> 2/3;  q2 {yes}: P 1, R
    # 1/5 -> 1/3
    assert rows[("mem0", "multi-hop")].f1 == pytest.approx(0.8)
    assert rows[("mem0", "overall")].f1 == pytest.approx((0.8 + 2 / 3 + 1 / 3 + 1 + 1) / 5)
    # BLEU-1 of "27 june 2023" against "the sunday before 27 june 2023": precision 1, brevity e^(1 -
    # 6/3)
    assert rows[("mem0", "temporal")].bleu1 == pytest.approx(0.36787944117144233)
    # no ranking in the file: no retrieval scores; the answers scored are the file's
    with Warehouse.open_reader(mini) as wh:
        given = wh.rows(
            "SELECT DISTINCT given FROM eval_protocol_answers WHERE eval_run_id = ?",
            [scored.evaluation.eval_run_id],
        )
    assert given == [(True,)]


def test_a_bad_predictions_file_stores_nothing(mini: Path, tmp_path: Path) -> None:
    from clonemem.flows.results_file import evaluate_results_file_flow

    with Warehouse.open_reader(mini) as wh:
        before = {t: wh.scalar(f"SELECT count(*) FROM {t}") for t in EVAL_TABLES}
    with pytest.raises(
        ResultsFileError, match=r"\$\[0\]\.qa\[3\]\.gpt-4_prediction: missing prediction"
    ):
        evaluate_results_file_flow(
            str(mini),
            "mini",
            str(_predictions(tmp_path, drop=3)),
            "bad-run",
            force=True,
            config=RunConfig(),
            predictions_format="locomo",
            key="gpt-4_prediction",
        )
    with Warehouse.open_reader(mini) as wh:
        assert {t: wh.scalar(f"SELECT count(*) FROM {t}") for t in EVAL_TABLES} == before


PERSONAMEM = Path(__file__).parent / "fixtures" / "personamem"


def test_a_personamem_benchmark_is_scored_by_multiple_choice_accuracy(tmp_path: Path) -> None:
    from clonemem.flows.evaluation import evaluate_flow

    path = tmp_path / "wh.duckdb"
    with Warehouse.open_writer(path) as wh:
        import_files(
            wh,
            "personamem",
            [PERSONAMEM / "questions_mini.csv", PERSONAMEM / "shared_contexts_mini.jsonl"],
            "pm",
        )
        types = dict(wh.rows("SELECT source_category, count(*) FROM questions GROUP BY 1"))
    result = evaluate_flow(str(path), "pm", ["oracle"], [5], force=True, config=RunConfig())
    rows = {r.group: r for r in result.protocols}
    assert {r.protocol for r in result.protocols} == {"personamem"}
    assert set(rows) == {"overall", *types}
    assert {g: r.n for g, r in rows.items() if g != "overall"} == types
    # the same picks as CloneMem's choice accuracy (PersonaMem's "(c)" and the option ids agree)
    assert rows["overall"].accuracy == pytest.approx(result.scores("oracle", 5).choice_accuracy)


def test_the_question_inspector_shows_a_questions_protocol_scores(
    evaluated, mini: Path, monkeypatch
) -> None:
    from tests.dashboard_kit import app, assert_clean, frame

    monkeypatch.setenv("CLONEMEM_WAREHOUSE", str(mini))
    with Warehouse.open_reader(mini) as wh:
        qid, answer, f1 = wh.rows(
            "SELECT question_id, a.answer_text, s.value FROM eval_protocol_scores s "
            "JOIN eval_protocol_answers a USING (eval_run_id, protocol, system, k, question_id) "
            "JOIN questions q USING (question_id) WHERE s.eval_run_id = ? AND s.protocol = 'locomo' "
            "AND s.metric = 'f1' AND q.source_category <> '5' ORDER BY question_id LIMIT 1",
            [evaluated.eval_run_id],
        )[0]
    at = app("Question inspector", benchmark="mini", question=qid)
    at.selectbox(key="qi_eval").set_value(evaluated.eval_run_id).run()
    assert_clean(at, "Question inspector")
    shown = frame(at, "protocol", "answer scored")
    locomo = shown.filter(shown["protocol"] == "locomo").to_dicts()
    assert [(r["answer scored"], r["f1"]) for r in locomo] == [(answer, f1)]
    assert set(shown["protocol"]) == {"locomo", "mem0"}  # not adversarial: mem0 scores it too
