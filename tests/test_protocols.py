"""The standard protocols' rules, each against a value computed by hand in the comments
(from the rules as the benchmarks' own evaluation code applies them), never by calling the code."""

from __future__ import annotations

import math

import numpy as np
import pytest

from clonemem.evaluation.protocols import (
    PROTOCOLS,
    Prediction,
    ProtocolQuestion,
    ProtocolSelectionError,
    Scope,
    protocol,
    selected,
)
from clonemem.evaluation.protocols import longmemeval as lme
from clonemem.evaluation.protocols.locomo import locomo_f1
from clonemem.evaluation.protocols.mem0 import label_correct, mem0_bleu1, mem0_f1
from clonemem.evaluation.protocols.personamem import option_id
from clonemem.evaluation.protocols.score import aggregate, result_rows, score_questions
from clonemem.evaluation.protocols.text import locomo_tokens, word_tokens

# -- LoCoMo's F1
# -------------------------------------------------------------------------------------


def test_locomo_normalisation_drops_commas_punctuation_articles_and_stems() -> None:
    # "The runners, and a Running race!" -> lower, no comma/punctuation -> "the runners and a
    # running race"
    # -> without a/an/the/and -> "runners running race" -> Porter: runner, run, race
    assert locomo_tokens("The runners, and a Running race!") == ["runner", "run", "race"]


def test_locomo_f1_is_over_a_bag_of_stemmed_tokens() -> None:
    # "The cat and the dog" -> [cat, dog]; "a dog" -> [dog]: shared 1, P = 1/2, R = 1, F1 = 2/3
    assert locomo_f1(4, "The cat and the dog", "a dog") == pytest.approx(2 / 3)
    # "running races" -> [run, race]; "ran a race" -> [ran, race]: shared 1, P = R = 1/2, F1 = 1/2
    assert locomo_f1(2, "running races", "ran a race") == pytest.approx(0.5)
    # bag: "dog dog" vs "dog": shared min(2, 1) = 1, P = 1/2, R = 1, F1 = 2/3 (a set F1 would give
    # 1)
    assert locomo_f1(4, "dog dog", "dog") == pytest.approx(2 / 3)
    assert locomo_f1(4, "", "dog") == 0.0


def test_category_1_averages_each_answer_part_best_matched() -> None:
    # answer parts painting | running | pottery; prediction parts running | pottery
    # painting: best F1 0; running: 1; pottery: 1 -> mean (0 + 1 + 1) / 3 = 2/3
    assert locomo_f1(1, "running, pottery", "painting, running, pottery") == pytest.approx(2 / 3)
    # the same prediction as one single-hop answer: tokens [run, potteri] vs [paint, run, potteri]
    # shared 2, P = 1, R = 2/3, F1 = 2 * (2/3) / (5/3) = 4/5
    assert locomo_f1(4, "running, pottery", "painting, running, pottery") == pytest.approx(0.8)


def test_category_3_scores_the_answer_before_the_first_semicolon() -> None:
    answer = "Liberal; because she supports LGBTQ rights"
    assert locomo_f1(3, "liberal", answer) == 1.0  # "Liberal" alone
    # without the cut: [liber, becaus, she, support, lgbtq, right] -> shared 1, P = 1, R = 1/6, F1 =
    # 2/7
    assert locomo_f1(4, "liberal", answer) == pytest.approx(2 / 7)


@pytest.mark.parametrize(
    ("prediction", "score"),
    [
        ("Not mentioned in the conversation", 1.0),
        ("NO INFORMATION AVAILABLE.", 1.0),
        ("That was not mentioned.", 1.0),
        ("It was never mentioned", 0.0),
        ("I don't know", 0.0),
        ("She went to Paris", 0.0),
    ],
)
def test_category_5_scores_one_only_for_the_two_phrases(prediction: str, score: float) -> None:
    assert locomo_f1(5, prediction, "Not mentioned in the conversation") == score


# -- mem0's F1 and BLEU-1 --------------------------------------------------------------------------


def test_mem0_f1_is_over_token_sets_without_stemming() -> None:
    # {dog} vs {dog}: 1 (LoCoMo's bag F1 gives 2/3 above)
    assert mem0_f1("dog dog", "dog") == 1.0
    # "Paris, France." -> {paris, france}; "france" -> {france}: P = 1/2, R = 1, F1 = 2/3
    assert mem0_f1("Paris, France.", "france") == pytest.approx(2 / 3)
    assert mem0_f1("running", "run") == 0.0  # no stemming
    assert mem0_f1("", "dog") == 0.0 and mem0_f1("dog", "") == 0.0


def test_bleu1_smooths_and_pays_the_brevity_penalty_on_a_one_word_prediction() -> None:
    # hypothesis [park], reference [at, the, park]: unigram precision 1/1; brevity penalty
    # exp(1 - 3/1) = e^-2; weights (1, 0, 0, 0): BLEU-1 = e^-2
    assert mem0_bleu1("Park", "at the park") == pytest.approx(math.exp(-2))
    # [the, park] vs [park]: clipped precision 1/2, hypothesis longer (no penalty): 1/2
    assert mem0_bleu1("the park", "park") == pytest.approx(0.5)
    assert mem0_bleu1("red car", "blue bike") == 0.0  # no shared word: 0 whatever the smoothing
    assert mem0_bleu1("", "park") == 0.0


def test_word_tokens_split_like_treebank_per_sentence() -> None:
    assert word_tokens("she's at the park, isn't she? yes.") == [
        "she",
        "'s",
        "at",
        "the",
        "park",
        ",",
        "is",
        "n't",
        "she",
        "?",
        "yes",
        ".",
    ]


def test_mem0_leaves_out_category_5_and_reads_the_judges_label() -> None:
    p = protocol("mem0")
    adversarial = ProtocolQuestion("q5", "p", "q5", "?", "Not mentioned", "adversarial", category=5)
    assert not p.applies(adversarial)
    assert label_correct("CORRECT") and not label_correct("WRONG") and not label_correct("correct")
    q = ProtocolQuestion("q1", "p", "q1", "?", "at the park", "single_hop", category=4)
    scores = {s.metric: s.value for s in p.score(q, Prediction("park", {"mem0": True}), Scope({}))}
    # f1: {park} vs {at, the, park}: P = 1, R = 1/3, F1 = 1/2; bleu1 e^-2 (above); judge 1
    assert scores == pytest.approx({"f1": 0.5, "bleu1": math.exp(-2), "judge": 1.0})
    unjudged = {s.metric: s.value for s in p.score(q, Prediction("park", {}), Scope({}))}
    assert unjudged["judge"] is None  # unscored, never 0


# -- LongMemEval's retrieval
# ------------------------------------------------------------------------


def test_ndcg_with_several_relevant_turns() -> None:
    evidence = {"a", "b", "c"}
    ranking = ["x", "a", "y", "b", "c"]
    # relevance at ranks 1..5: 0 1 0 1 1 -> DCG = 1/log2(2) + 1/log2(4) + 1/log2(5)
    # ideal (3 relevant first): 1 + 1/log2(2) + 1/log2(3)
    expected = (1 + 1 / 2 + 1 / math.log2(5)) / (2 + 1 / math.log2(3))
    assert lme.scores_at(ranking, evidence, 3, 5) == pytest.approx((1.0, 1.0, expected))
    # at k = 2: [x, a] -> DCG 1, ideal [1, 1] -> 2; some evidence but not all
    assert lme.scores_at(ranking, evidence, 3, 2) == pytest.approx((1.0, 0.0, 0.5))
    # no evidence at all: recall_any 0, recall_all 1 (all of none), ndcg 0, as LongMemEval computes
    # it
    assert lme.scores_at(ranking, set(), 0, 5) == (0.0, 1.0, 0.0)


SESSIONS = Scope(
    {"s1_1": "s1", "s1_2": "s1", "s2_1": "s2", "s2_2": "s2", "s3_1": "s3", "s4_1": "s4"}
)
RANKING = ("s2_1", "s2_2", "s1_2", "s3_1", "s1_1", "s4_1")


def test_session_conversion_grows_k_and_renames_non_evidence_turns_of_evidence_sessions() -> None:
    evidence = frozenset({"s1_1"})
    sessions = lme.session_ranking(RANKING, evidence, SESSIONS)
    # s1_2 is in the evidence session s1 but holds no answer: it stands for another session ("s1'")
    assert sessions == ["s2", "s2", "s1" + lme.NO_EVIDENCE_SESSION, "s3", "s1", "s4"]
    # k = 3: the first 3 turns cover {s2, s1'} (2); 4 turns cover {s2, s1', s3}: k grows to 4
    assert lme.session_k(sessions, 3) == 4
    # k = 4: 5 turns cover {s2, s1', s3, s1}
    assert lme.session_k(sessions, 4) == 5
    # k = 10 is beyond the ranking's 6 turns: it stays 10 (LongMemEval grows only while k <= length)
    assert lme.session_k(sessions, 10) == 10
    # k = 5: five distinct sessions {s2, s1', s3, s1, s4} are covered at 6 turns
    assert lme.session_k(sessions, 5) == 6
    # at k = 4 (5 turns): s1 first at rank 5 -> DCG 1/log2(5); ideal: one evidence turn -> 1
    assert lme.scores_at(sessions, {"s1"}, 1, 5) == pytest.approx((1.0, 1.0, 1 / math.log2(5)))
    # without the renaming s1_2 would be relevant at rank 3: DCG 1/log2(3) + 1/log2(5), another
    # figure
    assert 1 / math.log2(5) != pytest.approx(1 / math.log2(3) + 1 / math.log2(5))


def test_longmemeval_question_scores_turn_and_session_levels_and_leaves_abstention_out() -> None:
    p = protocol("longmemeval")
    q = ProtocolQuestion(
        "w1", "p", "lme_1", "?", "x", "multi-session", evidence_turns=frozenset({"s1_1"})
    )
    scores = {
        (s.granularity, s.k, s.metric): s.value
        for s in p.score(q, Prediction("x", {"longmemeval": True}, ranking=RANKING), SESSIONS)
    }
    assert scores[("qa", None, "accuracy")] == 1.0
    # turn level at 5: s1_1 is 5th -> recall 1/1, ndcg 1/log2(5)
    assert scores[("turn", 5, "ndcg_any")] == pytest.approx(1 / math.log2(5))
    # session level at 5: k grows to 6 (5 distinct: s2, s1', s3, s1, s4); s1 at rank 5
    assert scores[("session", 5, "recall_all")] == 1.0
    assert scores[("session", 5, "ndcg_any")] == pytest.approx(1 / math.log2(5))
    assert {k for g, k, _ in scores if g == "turn"} == {5, 10, 50}
    assert {k for g, k, _ in scores if g == "session"} == {5, 10}
    abstention = ProtocolQuestion(
        "w2", "p", "lme_1_abs", "?", "x", "multi-session", evidence_turns=frozenset({"s1_1"})
    )
    assert abstention.abstention
    only = p.score(
        abstention, Prediction("I don't know", {"longmemeval": True}, ranking=RANKING), SESSIONS
    )
    assert [(s.granularity, s.metric) for s in only] == [("qa", "accuracy")]


def test_longmemeval_judge_reply_counts_when_it_contains_yes() -> None:
    assert lme.reply_correct("Yes.") and lme.reply_correct("yes") and not lme.reply_correct("No")


def test_task_average_overall_abstention_groups_and_retrieval_without_abstention() -> None:
    p = protocol("longmemeval")
    qs = [
        ProtocolQuestion(
            "a1", "p", "a1", "?", "x", "temporal-reasoning", evidence_turns=frozenset({"s1_1"})
        ),
        ProtocolQuestion(
            "a2", "p", "a2", "?", "x", "temporal-reasoning", evidence_turns=frozenset({"s1_1"})
        ),
        ProtocolQuestion(
            "b1", "p", "b1_abs", "?", "x", "multi-session", evidence_turns=frozenset({"s1_1"})
        ),
    ]
    preds = {
        "a1": Prediction("x", {"longmemeval": True}, ranking=RANKING),
        "a2": Prediction("x", {"longmemeval": False}, ranking=RANKING),
        "b1": Prediction("x", {"longmemeval": True}, ranking=RANKING),
    }
    rows = score_questions([p], "bm25", 10, qs, preds, {"p": SESSIONS})
    out = {
        (r["granularity"], r["group_name"], r["k"], r["metric"]): r for r in aggregate(rows, 200, 0)
    }
    # temporal-reasoning [1, 0] -> 1/2; multi-session [1] -> 1; overall 2/3; task average (1/2 + 1)
    # / 2
    assert out[("qa", "temporal-reasoning", 10, "accuracy")]["value"] == pytest.approx(0.5)
    assert out[("qa", "overall", 10, "accuracy")]["value"] == pytest.approx(2 / 3)
    assert out[("qa", "task_average", 10, "accuracy")]["value"] == pytest.approx(0.75)
    assert out[("qa", "task_average", 10, "accuracy")]["n"] == 3
    assert out[("qa", "abstention", 10, "accuracy")]["value"] == 1.0
    assert out[("qa", "non_abstention", 10, "accuracy")]["value"] == pytest.approx(0.5)
    # retrieval: the abstention question is left out -> 2 questions in overall
    assert out[("turn", "overall", 5, "recall_any")]["n"] == 2
    assert ("turn", "multi-session", 5, "recall_any") not in out
    low, high = (
        out[("qa", "overall", 10, "accuracy")]["ci_low"],
        out[("qa", "overall", 10, "accuracy")]["ci_high"],
    )
    assert 0.0 <= low <= 2 / 3 <= high <= 1.0


# -- PersonaMem and the groups
# ------------------------------------------------------------------------


def test_personamem_accuracy_overall_and_per_type() -> None:
    p = protocol("personamem")
    qs = [
        ProtocolQuestion("1", "p", "1", "?", "", "recall_facts", correct_choice_id="(c)"),
        ProtocolQuestion("2", "p", "2", "?", "", "recall_facts", correct_choice_id="(c)"),
        ProtocolQuestion("3", "p", "3", "?", "", "suggest_ideas", correct_choice_id="b"),
    ]
    preds = {
        "1": Prediction(choice_id="c"),
        "2": Prediction(choice_id="(a)"),
        "3": Prediction(answer="(b) Try a new trail this weekend"),
    }
    rows = score_questions([p], "oracle", 5, qs, preds, {"p": Scope({})})
    out = {r["group_name"]: r["value"] for r in aggregate(rows, 100, 0)}
    # recall_facts: [1, 0] -> 1/2; suggest_ideas: [1]; overall 2/3
    assert out == pytest.approx({"recall_facts": 0.5, "suggest_ideas": 1.0, "overall": 2 / 3})
    assert (
        option_id("Option C: the lake") == "c"
        and option_id("(d)") == "d"
        and option_id("maybe") is None
    )


def test_locomo_groups_by_category_name_and_number_with_both_overalls() -> None:
    p = protocol("locomo")
    qs = [
        ProtocolQuestion("1", "p", "1", "?", "dog", "single_hop", category=4),
        ProtocolQuestion(
            "2", "p", "2", "?", "Not mentioned in the conversation", "adversarial", category=5
        ),
    ]
    preds = {"1": Prediction("dog"), "2": Prediction("I think Paris")}
    rows = result_rows(
        aggregate(score_questions([p], "bm25", 5, qs, preds, {"p": Scope({})}), 100, 0)
    )
    got = {(r.group, r.category): (r.n, r.f1) for r in rows}
    # single-hop 1; adversarial 0; overall (1-4) = 1; with adversarial (1 + 0) / 2
    assert got == {
        ("single-hop", 4): (1, 1.0),
        ("adversarial", 5): (1, 0.0),
        ("overall", None): (1, 1.0),
        ("overall_with_adversarial", None): (2, 0.5),
    }
    dumped = rows[0].model_dump(mode="json")
    assert set(dumped) == {
        "protocol",
        "protocol_version",
        "system",
        "k",
        "group",
        "n",
        "category",
        "f1",
        "f1_ci",
    }


def test_a_missing_prediction_is_unscored_with_its_reason() -> None:
    p = protocol("locomo")
    q = ProtocolQuestion("1", "p", "1", "?", "dog", "single_hop", category=4)
    (row,) = score_questions([p], "bm25", 5, [q], {}, {"p": Scope({})})
    assert row.value is None and row.reason
    (agg, *_) = aggregate([row], 100, 0)
    assert agg["n"] == 1 and agg["value"] is None


# -- which protocols run ---------------------------------------------------------------------------


def test_protocols_come_from_the_importer_and_the_config_adjusts_them() -> None:
    assert set(PROTOCOLS.names()) >= {"locomo", "mem0", "longmemeval", "personamem"}
    assert selected(("locomo", "mem0"), None) == ("locomo", "mem0")
    assert selected(("locomo", "mem0"), []) == ()
    assert selected(("locomo", "mem0"), ["-mem0"]) == ("locomo",)
    assert selected(("locomo",), ["+longmemeval"]) == ("locomo", "longmemeval")
    assert selected((), ["personamem"]) == ("personamem",)
    with pytest.raises(ProtocolSelectionError):
        selected(("locomo",), ["mem0", "-locomo"])
    with pytest.raises(LookupError, match="known"):
        selected((), ["lokomo"])


def test_task_average_interval_resamples_within_each_type() -> None:
    from clonemem.evaluation.protocols.score import task_average

    point, (low, high) = task_average([np.array([1.0, 1.0]), np.array([0.0, 0.0, np.nan])], 100, 0)
    # type means 1 and 0 (NaN left out), whatever the resample: the interval collapses on 1/2
    assert point == 0.5 and low == 0.5 and high == 0.5


def test_declared_protocols_follow_the_benchmarks_formats_and_skip_a_broken_importer(wh) -> None:
    import json as _json

    from clonemem.evaluation.protocols.load import declared_protocols
    from clonemem.importers import IMPORTERS

    wh.upsert(
        "benchmarks",
        [
            {
                "benchmark_id": "b1",
                "name": "b",
                "source": "imported",
                "is_offline": False,
                "config_json": _json.dumps({"formats": ["locomo", "longmemeval"]}),
            }
        ],
    )
    IMPORTERS.add_lazy("broken", "no_such_package.importer:Broken")
    try:
        assert declared_protocols(wh, "b1") == ("locomo", "mem0", "longmemeval")
    finally:
        IMPORTERS.remove("broken")
