"""The standard protocols' cost (issue 28).

``score``: 1,500 synthetic questions — 500 LoCoMo-shaped (five categories, answers and predictions of a
few words), 500 LongMemEval-shaped (six types, abstention, 50 sessions of 10 turns, a ranking of depth
100) and 500 PersonaMem-shaped (four options) — scored by the four protocols (LoCoMo F1; mem0 F1,
BLEU-1, J; LongMemEval accuracy and turn/session recall and NDCG; PersonaMem accuracy) for one system at
one k, then every group aggregated with 1,000 bootstrap resamples. Prints JSON (seconds, peak RSS).

    python benchmarks/protocols.py score
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import time

from clonemem.evaluation.protocols import Prediction, ProtocolQuestion, Scope, protocol
from clonemem.evaluation.protocols.score import aggregate, result_rows, score_questions

WORDS = ("pottery running marathon sister museum ceramics glaze mugs sunday june paris hiking trail lake "
         "guitar concert dog adopted puppy painting sunset beach camping tent pasta recipe bakery").split()
LME_TYPES = ("single-session-user", "single-session-assistant", "single-session-preference",
             "temporal-reasoning", "knowledge-update", "multi-session")
PM_TYPES = ("recall_user_shared_facts", "suggest_new_ideas", "track_full_preference_evolution",
            "provide_preference_aligned_recommendations")


def _phrase(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _locomo(rng: random.Random, n: int) -> list[tuple[ProtocolQuestion, Prediction]]:
    out = []
    for i in range(n):
        category = i % 5 + 1
        answer = ", ".join(_phrase(rng, 2) for _ in range(3)) if category == 1 else _phrase(rng, 3)
        said = "Not mentioned in the conversation" if rng.random() < 0.2 else _phrase(rng, rng.randint(1, 6))
        q = ProtocolQuestion(f"lo{i}", "locomo", f"lo{i}", "?", answer, "locomo", category=category)
        out.append((q, Prediction(said, {"mem0": rng.random() < 0.6})))
    return out


def _longmemeval(rng: random.Random, n: int) -> tuple[list[tuple[ProtocolQuestion, Prediction]], Scope]:
    turns = [f"s{s}_{t}" for s in range(50) for t in range(1, 11)]
    scope = Scope({t: t.rsplit("_", 1)[0] for t in turns})
    out = []
    for i in range(n):
        evidence = frozenset(rng.sample(turns, rng.randint(1, 3)))
        ranking = tuple(rng.sample(turns, 100))
        suffix = "_abs" if i % 10 == 0 else ""
        q = ProtocolQuestion(f"lm{i}", "lme", f"lm{i}{suffix}", "?", _phrase(rng, 3), LME_TYPES[i % 6],
                             evidence_turns=evidence)
        out.append((q, Prediction(_phrase(rng, 8), {"longmemeval": rng.random() < 0.5}, ranking=ranking)))
    return out, scope


def _personamem(rng: random.Random, n: int) -> list[tuple[ProtocolQuestion, Prediction]]:
    return [(ProtocolQuestion(f"pm{i}", "pm", f"pm{i}", "?", "", PM_TYPES[i % 4],
                              correct_choice_id=f"({rng.choice('abcd')})"),
             Prediction(choice_id=rng.choice("abcd"))) for i in range(n)]


def score(questions: int = 1500, samples: int = 1000) -> dict[str, object]:
    rng = random.Random(7)
    third = questions // 3
    lme, lme_scope = _longmemeval(rng, third)
    sets = {"locomo": _locomo(rng, third), "longmemeval": lme, "personamem": _personamem(rng, third)}
    scopes = {"locomo": Scope({}), "lme": lme_scope, "pm": Scope({})}
    started = time.perf_counter()
    rows = []
    for names, pairs in ((("locomo", "mem0"), sets["locomo"]), (("longmemeval",), sets["longmemeval"]),
                         (("personamem",), sets["personamem"])):
        qs = [q for q, _ in pairs]
        preds = {q.question_id: p for q, p in pairs}
        rows += score_questions([protocol(n) for n in names], "bm25", 10, qs, preds, scopes)
    scored = time.perf_counter()
    groups = aggregate(rows, samples, 0)
    out = result_rows(groups)
    done = time.perf_counter()
    return {"benchmark": "protocols.score", "questions": 3 * third, "per_question_scores": len(rows),
            "protocol_rows": len(out), "bootstrap_resamples": samples,
            "score_seconds": round(scored - started, 3), "aggregate_seconds": round(done - scored, 3),
            "total_seconds": round(done - started, 3),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("section", choices=["score"])
    parser.add_argument("--questions", type=int, default=1500)
    args = parser.parse_args()
    if args.section == "score":
        print(json.dumps(score(args.questions), indent=2))


if __name__ == "__main__":
    main()
