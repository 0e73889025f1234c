"""Import speed of a large CloneMem release file (issue: a 1M-character persona file in under 10 s).

Builds a deterministic synthetic persona file of the requested size, then times parsing+checking and
landing into a fresh warehouse, and an export. Prints JSON.

    python benchmarks/import_release.py [--chars 1000000]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import tempfile
import time
from pathlib import Path

from clonemem.exporters.release import export_release
from clonemem.importers.base import load_personas
from clonemem.importers.release import parse_release_persona
from clonemem.warehouse import Warehouse

WORDS = (
    "morning meeting project deadline sister coffee train weekend garden letter worried excited tired "
    "proud decision apartment rent doctor walk river friend dinner promotion manager plan trip "
    "argument apology music class sketch painting budget savings"
).split()
MEDIA = [
    "diary",
    "social_media",
    "chat_private",
    "chat_group",
    "email",
    "memo",
    "search_history",
    "calendar_event",
]
TYPES = [
    "single_point_factual",
    "comparison",
    "trajectory",
    "pattern",
    "causal",
    "counterfactual",
    "inferential",
    "unanswerable",
]


def synthetic_release(target_chars: int, seed: int = 7) -> dict:
    rng = random.Random(seed)
    start = dt.datetime(2022, 1, 1)
    context, size, i = [], 0, 0
    while size < target_chars * 0.85:
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(40, 160))) + "."
        context.append(
            {
                "id": f"trace-{i:05d}",
                "medium": rng.choice(MEDIA),
                "event_date": (start + dt.timedelta(hours=7 * i)).isoformat(),
                "content": text,
            }
        )
        size += len(text) + 80
        i += 1
    questions, q = [], 0
    while size < target_chars:
        ids = [rng.choice(context)["id"] for _ in range(rng.randint(2, 5))]
        choices = [
            {"id": c, "text": " ".join(rng.choice(WORDS) for _ in range(20))} for c in "ABCD"
        ]
        choices.append({"id": "E", "text": "Cannot be determined based on available information"})
        item = {
            "id": f"q-{q:04d}",
            "question": "Do you remember " + " ".join(rng.choice(WORDS) for _ in range(15)) + "?",
            "question_type": TYPES[q % 8],
            "question_time": "2024-06-01T20:00:00",
            "answer": " ".join(rng.choice(WORDS) for _ in range(40)),
            "dimension": ["experience", "emotion", "opinion"][q % 3],
            "digital_trace_ids": ids,
            "evidence": [
                {
                    "statement": " ".join(rng.choice(WORDS) for _ in range(18)),
                    "digital_trace_ids": [t],
                }
                for t in ids
            ],
            "choices": choices,
            "correct_choice_id": "ABCDE"[q % 5],
        }
        questions.append(item)
        size += len(json.dumps(item))
        q += 1
    rng.shuffle(context)  # release context is not sorted
    return {
        "person_name": "Bench Person",
        "person_id": "bench",
        "context": context,
        "questions": questions,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chars", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.json"
        path.write_text(json.dumps(synthetic_release(args.chars), ensure_ascii=False), "utf-8")
        runs = []
        for r in range(args.repeat):
            t0 = time.perf_counter()
            parsed = parse_release_persona(path)
            t1 = time.perf_counter()
            with Warehouse.open_writer(Path(tmp) / f"wh{r}.duckdb") as wh:
                t2 = time.perf_counter()
                summary = load_personas(wh, [parsed], "bench")
                t3 = time.perf_counter()
                export_release(wh, "bench", Path(tmp) / f"out{r}")
                t4 = time.perf_counter()
            runs.append(
                {
                    "parse_s": t1 - t0,
                    "load_s": t3 - t2,
                    "import_total_s": (t1 - t0) + (t3 - t2),
                    "export_s": t4 - t3,
                }
            )
        best = min(runs, key=lambda x: x["import_total_s"])
        print(
            json.dumps(
                {
                    "benchmark": "import_release",
                    "file_chars": len(path.read_text("utf-8")),
                    "traces": summary.traces,
                    "questions": summary.questions,
                    "import_seconds_best": round(best["import_total_s"], 3),
                    "import_seconds_worst": round(max(x["import_total_s"] for x in runs), 3),
                    "parse_seconds": round(best["parse_s"], 3),
                    "load_seconds": round(best["load_s"], 3),
                    "export_seconds": round(best["export_s"], 3),
                    "target_seconds": 10.0,
                    "meets_target": max(x["import_total_s"] for x in runs) < 10.0,
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
