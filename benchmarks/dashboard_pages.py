"""Dashboard page render times on a large warehouse (issue 10: every page in under 2 s with >= 10k
traces and >= 2k questions).

Builds a warehouse in a temporary folder: a synthetic release benchmark ('big', default 4 personas ×
2,600 traces × 550 questions, options of varied length), the LoCoMo dev conversations when present
('locomo-dev'), and a generated benchmark (`clonemem generate --config configs/tiny.toml`, stages I–IV and the gate,
'tiny') so the pages that show generation internals have them. 'big' is evaluated twice with bm25 and
random at k = 5, 10 (`clonemem evaluate big --systems bm25,random --k 5,10 --force`, aggregated over
questions, then as the mean of persona means: two different evaluations for the History page), 'tiny' once.
Then every page is rendered through Streamlit's AppTest (one warm-up, then ``--repeat`` timed runs)
for each benchmark. Prints JSON.

    python benchmarks/dashboard_pages.py [--personas 4] [--traces 2600] [--questions 550] [--repeat 3]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOCOMO_DEV = Path(os.environ.get("CLONEMEM_LOCOMO_DEV", "/work/shared/data/locomo-dev"))
TARGET_S = 2.0
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
TINY = ROOT / "configs" / "tiny.toml"  # the tests' tiny run (tests/pipeline_kit.py)


def _words(rng: random.Random, lo: int, hi: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))


def synthetic_persona(index: int, traces: int, questions: int, seed: int = 11) -> dict:
    """One release-format persona: ``traces`` traces over two years, ``questions`` multiple-choice items
    citing 1–4 traces each (as evidence), asked after their latest trace."""
    rng = random.Random(seed * 1000 + index)
    start = dt.datetime(2022, 1, 1)
    step = dt.timedelta(minutes=int(2 * 365 * 24 * 60 / traces))
    context = [
        {
            "id": f"p{index}-t{i:05d}",
            "medium": rng.choice(MEDIA),
            "event_date": (start + step * i).isoformat(),
            "content": _words(rng, 30, 140) + ".",
        }
        for i in range(traces)
    ]
    items = []
    for q in range(questions):
        cited = sorted(rng.sample(range(traces), rng.randint(1, 4)))
        asked = start + step * cited[-1] + dt.timedelta(days=rng.randint(1, 30))
        correct = "ABCDE"[q % 5]
        choices = [{"id": c, "text": _words(rng, 8, 30)} for c in "ABCD"]
        choices.append({"id": "E", "text": "Cannot be determined based on available information"})
        items.append(
            {
                "id": f"p{index}-q{q:04d}",
                "question": f"Do you remember {_words(rng, 8, 20)}?",
                "question_type": TYPES[q % len(TYPES)],
                "question_time": asked.isoformat(),
                "answer": _words(rng, 20, 50),
                "dimension": ["experience", "emotion", "opinion"][q % 3],
                "digital_trace_ids": [context[i]["id"] for i in cited],
                "evidence": [
                    {"statement": _words(rng, 10, 25), "digital_trace_ids": [context[i]["id"]]}
                    for i in cited
                ],
                "choices": choices,
                "correct_choice_id": correct,
            }
        )
    rng.shuffle(context)
    return {
        "person_name": f"Bench Person {index}",
        "person_id": f"bench-{index}",
        "context": context,
        "qa_items": items,
    }


def _cli(warehouse: Path, env: dict[str, str], *args: str) -> float:
    exe = str(Path(sys.executable).with_name("clonemem"))
    t0 = time.perf_counter()
    got = subprocess.run(
        [exe, "--warehouse", str(warehouse), *args], env=env, capture_output=True, text=True
    )
    if got.returncode != 0:
        raise SystemExit(
            f"clonemem {' '.join(args)} failed ({got.returncode}):\n{got.stderr[-3000:]}"
        )
    return round(time.perf_counter() - t0, 1)


def build(folder: Path, personas: int, traces: int, questions: int) -> tuple[Path, dict]:
    from clonemem.importers import import_files
    from clonemem.warehouse import Warehouse

    path = folder / "wh.duckdb"
    files = []
    for p in range(personas):
        file = folder / "big" / f"bench_{p}_benchmark_en.json"
        file.parent.mkdir(exist_ok=True)
        file.write_text(json.dumps(synthetic_persona(p, traces, questions)), "utf-8")
        files.append(file)
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    with Warehouse.open_writer(path) as wh:
        import_files(wh, "release", files, "big")
        if LOCOMO_DEV.is_dir():
            import_files(wh, "locomo", sorted(LOCOMO_DEV.glob("*.json")), "locomo-dev")
    timings["imports_s"] = round(time.perf_counter() - t0, 1)
    env = {**os.environ, "PREFECT_HOME": str(folder / "prefect"), "CLONEMEM_LOCK_WAIT": "600"}
    timings["generate_tiny_s"] = _cli(path, env, "generate", "--config", str(TINY))
    for i, aggregate in enumerate(
        ("questions", "personas")
    ):  # an identical re-run would not be stored again
        timings[f"evaluate_big_{i + 1}_s"] = _cli(
            path,
            env,
            "evaluate",
            "big",
            "--systems",
            "bm25,random",
            "--k",
            "5,10",
            "--force",
            "--aggregate",
            aggregate,
        )
    timings["evaluate_tiny_s"] = _cli(
        path, env, "evaluate", "tiny", "--systems", "bm25,random", "--k", "5,10"
    )
    return path, timings


def time_pages(
    path: Path, benchmarks: list[str], repeat: int
) -> dict[str, dict[str, dict[str, float]]]:
    from streamlit.testing.v1 import AppTest

    from clonemem.dashboard import APP, PAGES

    os.environ["CLONEMEM_WAREHOUSE"] = str(path)
    out: dict[str, dict[str, dict[str, float]]] = {}
    for name in benchmarks:
        out[name] = {}
        for title, script, _url in PAGES:
            at = AppTest.from_file(str(APP), default_timeout=120)
            at.query_params["benchmark"] = name
            at.run()
            at.switch_page(script)
            seconds = []
            for _ in range(repeat + 1):  # the first run warms this page up (imports, first queries)
                t0 = time.perf_counter()
                at.run()
                seconds.append(time.perf_counter() - t0)
                if at.exception:
                    raise SystemExit(f"{title} on {name}: {at.exception[0].message}")
                if [t.value for t in at.title] != [title]:
                    raise SystemExit(f"{title} on {name}: page did not render its title")
            timed = seconds[1:]
            out[name][title] = {
                "median_s": round(statistics.median(timed), 3),
                "max_s": round(max(timed), 3),
                "first_s": round(seconds[0], 3),
            }
    return out


def warehouse_in(folder: Path, personas: int, traces: int, questions: int) -> tuple[Path, dict]:
    """The warehouse in ``folder`` (``--folder``): one already there is reused as it is, else it is built."""
    path = folder / "wh.duckdb"
    if path.exists():
        return path, {"reused": str(path)}
    return build(folder, personas, traces, questions)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--personas", type=int, default=4)
    parser.add_argument("--traces", type=int, default=2600, help="traces per persona")
    parser.add_argument("--questions", type=int, default=550, help="questions per persona")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--folder",
        type=Path,
        help="build the warehouse here and keep it; a warehouse already there is reused as it is",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="clonemem-dash-bench-") as tmp:
        folder = args.folder or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        path, build_times = warehouse_in(folder, args.personas, args.traces, args.questions)
        from clonemem.warehouse import Warehouse

        with Warehouse.open_reader(path) as wh:
            counts = dict(
                zip(
                    ("benchmarks", "traces", "questions", "eval_runs", "llm_calls"),
                    wh.rows(
                        "SELECT (SELECT count(*) FROM benchmarks), (SELECT count(*) FROM traces), "
                        "(SELECT count(*) FROM questions), (SELECT count(*) FROM eval_runs), (SELECT count(*) FROM llm_calls)"
                    )[0],
                )
            )
            names = [r[0] for r in wh.rows("SELECT name FROM benchmarks ORDER BY name")]
        pages = time_pages(path, names, args.repeat)
        size_mb = round(path.stat().st_size / 1e6, 1)
    worst = max(p["max_s"] for per in pages.values() for p in per.values())
    print(
        json.dumps(
            {
                "benchmark": "dashboard_pages",
                "warehouse": {**counts, "megabytes": size_mb},
                "build": build_times,
                "target_s": TARGET_S,
                "timing": "AppTest script run, "
                f"median and max of {args.repeat} runs after one warm-up run",
                "pages": pages,
                "worst_s": worst,
                "all_under_target": worst < TARGET_S,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
