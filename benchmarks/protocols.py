"""The field's benchmarks at their real sizes (issue 28): importing a LongMemEval file of the
``longmemeval_s`` shape (target: < 90 s and < 1.5 GB peak RSS on 2 cores), and a scaled-down
``longmemeval_m`` (~500 sessions per instance) to estimate what the full ``_m`` costs; and the
standard protocols' scoring of 1,500 questions.

Each import runs in a child process of its own (its peak RSS is its own ``ru_maxrss``), through
the same path as ``clonemem import longmemeval`` (:func:`clonemem.importers.base.import_stream`), into a
fresh warehouse. The synthetic files (``benchmarks/longmemeval_synthetic.py``) are written to a
temporary folder unless ``--keep DIR`` names one (then reused). Prints JSON.

    python benchmarks/protocols.py import [--instances 500] [--m-instances 50] [--keep DIR]

``score``: 1,500 synthetic questions — 500 LoCoMo-shaped (five categories, answers and predictions of a
few words), 500 LongMemEval-shaped (six types, abstention, 50 sessions of 10 turns, a ranking of depth
100) and 500 PersonaMem-shaped (four options) — scored by the four protocols (LoCoMo F1; mem0 F1,
BLEU-1, J; LongMemEval accuracy and turn/session recall and NDCG; PersonaMem accuracy) for one system at
one k, then every group aggregated with 1,000 bootstrap resamples, in this process (seconds, peak RSS).

    python benchmarks/protocols.py score [--questions 1500]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: the repository's root is where `benchmarks` is
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import longmemeval_synthetic
from clonemem.evaluation.protocols import Prediction, ProtocolQuestion, Scope, protocol
from clonemem.evaluation.protocols.score import aggregate, result_rows, score_questions

TARGET_SECONDS = 90.0
TARGET_RSS_MB = 1536.0

_CHILD = """
import json, resource, sys, time
from clonemem.importers import importer
from clonemem.importers.base import import_stream
from clonemem.warehouse import Warehouse
t0 = time.perf_counter()
summary = import_stream(sys.argv[2], importer("longmemeval"), [sys.argv[1]], "lme")
seconds = time.perf_counter() - t0
with Warehouse.open_reader(sys.argv[2]) as wh:
    texts, chars = wh.rows("SELECT count(*), sum(length(content)) FROM trace_texts")[0]
    turn_chars = wh.scalar("SELECT sum(length(content)) FROM v_traces")
print(json.dumps({"seconds": seconds, "personas": summary.personas, "traces": summary.traces,
                  "stored_texts": texts, "stored_text_chars": chars, "turn_chars": turn_chars,
                  "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}))
"""


def _file(folder: Path, name: str, instances: int, sessions: int, pool: int) -> tuple[Path, dict]:
    path = folder / f"{name}-{instances}x{sessions}-pool{pool}.json"
    shape = {"instances": instances, "sessions_per_instance": sessions, "pool": pool}
    if not path.exists():
        t0 = time.perf_counter()
        partial = path.with_suffix(".partial")
        longmemeval_synthetic.write(partial, instances, sessions, pool)
        partial.replace(path)
        shape["generated_s"] = round(time.perf_counter() - t0, 1)
    return path, shape | {"file_mb": round(path.stat().st_size / 2**20, 1)}


def measure_import(path: Path, folder: Path) -> dict:
    """Import ``path`` into a fresh warehouse in a child process: seconds, peak RSS, what was stored."""
    warehouse = folder / f"{path.stem}.duckdb"
    for leftover in (warehouse, warehouse.with_name(warehouse.name + ".wal")):
        leftover.unlink(missing_ok=True)
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path), str(warehouse)],
        capture_output=True,
        text=True,
        check=False,
        env=os.environ | {"PYTHONPATH": str(Path(__file__).resolve().parents[1])},
    )
    if done.returncode != 0:
        raise SystemExit(
            done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "import failed"
        )
    out = json.loads(done.stdout.strip().splitlines()[-1])
    out["warehouse_mb"] = round(warehouse.stat().st_size / 2**20, 1)
    out["seconds"] = round(out["seconds"], 1)
    out["text_dedup_ratio"] = round(out["turn_chars"] / max(1, out["stored_text_chars"]), 1)
    warehouse.unlink(missing_ok=True)
    return out


def run_import(instances: int, m_instances: int, folder: Path) -> dict:
    s_path, s_shape = _file(folder, "longmemeval_s", instances, 50, 500)
    s = s_shape | measure_import(s_path, folder)
    s["meets_target"] = s["seconds"] < TARGET_SECONDS and s["peak_rss_mb"] < TARGET_RSS_MB
    print(
        json.dumps({"longmemeval_s": s}), file=sys.stderr, flush=True
    )  # early, the _m run takes a while
    # _m: ~500 sessions per instance; a tenth of its instances (the pool scaled alike), extrapolated
    m_path, m_shape = _file(folder, "longmemeval_m", m_instances, 500, 500 * m_instances // 5)
    m = m_shape | measure_import(m_path, folder)
    scale = 500 / m_instances
    m["extrapolated_to_500_instances"] = {
        "seconds": round(m["seconds"] * scale),
        "file_gb": round(m["file_mb"] * scale / 1024, 1),
        "traces": int(m["traces"] * scale),
        "note": "time, file size and trace rows grow with the instances; peak RSS does not (one batch held)",
    }
    return {
        "benchmark": "protocols.import",
        "cpus": os.cpu_count(),
        "load_1min": round(os.getloadavg()[0], 2),
        "longmemeval_s": s,
        "longmemeval_m_scaled": m,
    }


WORDS = (
    "pottery running marathon sister museum ceramics glaze mugs sunday june paris hiking trail lake "
    "guitar concert dog adopted puppy painting sunset beach camping tent pasta recipe bakery"
).split()
LME_TYPES = (
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "temporal-reasoning",
    "knowledge-update",
    "multi-session",
)
PM_TYPES = (
    "recall_user_shared_facts",
    "suggest_new_ideas",
    "track_full_preference_evolution",
    "provide_preference_aligned_recommendations",
)


def _phrase(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _locomo(rng: random.Random, n: int) -> list[tuple[ProtocolQuestion, Prediction]]:
    out = []
    for i in range(n):
        category = i % 5 + 1
        answer = ", ".join(_phrase(rng, 2) for _ in range(3)) if category == 1 else _phrase(rng, 3)
        said = (
            "Not mentioned in the conversation"
            if rng.random() < 0.2
            else _phrase(rng, rng.randint(1, 6))
        )
        q = ProtocolQuestion(f"lo{i}", "locomo", f"lo{i}", "?", answer, "locomo", category=category)
        out.append((q, Prediction(said, {"mem0": rng.random() < 0.6})))
    return out


def _longmemeval(
    rng: random.Random, n: int
) -> tuple[list[tuple[ProtocolQuestion, Prediction]], Scope]:
    turns = [f"s{s}_{t}" for s in range(50) for t in range(1, 11)]
    scope = Scope({t: t.rsplit("_", 1)[0] for t in turns})
    out = []
    for i in range(n):
        evidence = frozenset(rng.sample(turns, rng.randint(1, 3)))
        ranking = tuple(rng.sample(turns, 100))
        suffix = "_abs" if i % 10 == 0 else ""
        q = ProtocolQuestion(
            f"lm{i}",
            "lme",
            f"lm{i}{suffix}",
            "?",
            _phrase(rng, 3),
            LME_TYPES[i % 6],
            evidence_turns=evidence,
        )
        out.append(
            (q, Prediction(_phrase(rng, 8), {"longmemeval": rng.random() < 0.5}, ranking=ranking))
        )
    return out, scope


def _personamem(rng: random.Random, n: int) -> list[tuple[ProtocolQuestion, Prediction]]:
    return [
        (
            ProtocolQuestion(
                f"pm{i}",
                "pm",
                f"pm{i}",
                "?",
                "",
                PM_TYPES[i % 4],
                correct_choice_id=f"({rng.choice('abcd')})",
            ),
            Prediction(choice_id=rng.choice("abcd")),
        )
        for i in range(n)
    ]


def score(questions: int = 1500, samples: int = 1000) -> dict[str, object]:
    rng = random.Random(7)
    third = questions // 3
    lme, lme_scope = _longmemeval(rng, third)
    sets = {
        "locomo": _locomo(rng, third),
        "longmemeval": lme,
        "personamem": _personamem(rng, third),
    }
    scopes = {"locomo": Scope({}), "lme": lme_scope, "pm": Scope({})}
    started = time.perf_counter()
    rows = []
    for names, pairs in (
        (("locomo", "mem0"), sets["locomo"]),
        (("longmemeval",), sets["longmemeval"]),
        (("personamem",), sets["personamem"]),
    ):
        qs = [q for q, _ in pairs]
        preds = {q.question_id: p for q, p in pairs}
        rows += score_questions([protocol(n) for n in names], "bm25", 10, qs, preds, scopes)
    scored = time.perf_counter()
    groups = aggregate(rows, samples, 0)
    out = result_rows(groups)
    done = time.perf_counter()
    return {
        "benchmark": "protocols.score",
        "load_1min": round(os.getloadavg()[0], 2),
        "questions": 3 * third,
        "per_question_scores": len(rows),
        "protocol_rows": len(out),
        "bootstrap_resamples": samples,
        "score_seconds": round(scored - started, 3),
        "aggregate_seconds": round(done - scored, 3),
        "total_seconds": round(done - started, 3),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("section", choices=["import", "score"])
    parser.add_argument("--questions", type=int, default=1500, help="score: how many questions")
    parser.add_argument("--instances", type=int, default=500)
    parser.add_argument("--m-instances", type=int, default=50)
    parser.add_argument(
        "--keep", type=Path, default=None, help="folder for the synthetic files (reused)"
    )
    args = parser.parse_args()
    if args.section == "score":
        print(json.dumps(score(args.questions), indent=2))
        return
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
        print(json.dumps(run_import(args.instances, args.m_instances, args.keep), indent=2))
        return
    with tempfile.TemporaryDirectory() as tmp:
        print(json.dumps(run_import(args.instances, args.m_instances, Path(tmp)), indent=2))


if __name__ == "__main__":
    main()
