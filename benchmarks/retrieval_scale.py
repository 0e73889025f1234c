"""Retrieval at scale (issues 9, 14): per retrieval system, index build time for 6,000 traces, and one
persona of 5,000 traces (~1M tokens) with 1,000 time-aware questions end to end (build + every
retrieval at k=20): per-query p50/p95 latency and the peak memory of the process. Prints JSON.

Each system runs in its own process, so build times include loading the models it needs (nothing is
shared through the embedding cache) and the peak RSS is that system's own. flat_combined and
flat_wo_org call the offline extractor once per trace, as in an evaluation.

The corpus is synthetic but shaped like a persona: traces over three years in eight media, drawn
from a shared vocabulary with per-topic words, so queries are neither trivial nor hopeless.

    python benchmarks/retrieval_scale.py [--traces 5000] [--build-traces 6000] [--questions 1000]
                                         [--systems bm25 dense hybrid flat_combined flat_wo_org]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import resource
import subprocess
import sys
import time

os.environ.setdefault(
    "CLONEMEM_EMBED_CACHE", "off"
)  # builds are timed cold, not from an earlier run's vectors

import numpy as np

from clonemem.memory.base import BuildContext, MemoryTrace, QuestionView

COMMON = (
    "today work home friend coffee morning evening call message week plan time family walk city "
    "dinner train weather tired happy busy weekend meeting project talk think feel remember"
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
SYSTEMS = ["bm25", "dense", "hybrid", "flat_combined", "flat_wo_org"]
TARGETS = {
    "build_seconds_6k": 60.0,
    "total_seconds": 60.0,
    "query_p50_ms": 5.0,
    "query_p95_ms": 20.0,
}


def corpus(
    n_traces: int, n_topics: int = 400, seed: int = 3
) -> tuple[list[MemoryTrace], dict[str, int]]:
    rng = random.Random(seed)
    topics = [
        [f"{w}{i}" for w in ("alpha", "beta", "gamma", "delta", "omega", "sigma")]
        for i in range(n_topics)
    ]
    start = dt.datetime(2022, 1, 1)
    traces, topic_of = [], {}
    for i in range(n_traces):
        topic = rng.randrange(n_topics)
        words = [
            rng.choice(COMMON) if rng.random() < 0.8 else rng.choice(topics[topic])
            for _ in range(rng.randint(120, 190))
        ]
        tid = f"t{i:05d}"
        traces.append(
            MemoryTrace(
                tid,
                rng.choice(MEDIA),
                start + dt.timedelta(minutes=int(i * 315)),
                " ".join(words) + ".",
            )
        )
        topic_of[tid] = topic
    return traces, topic_of


def questions(
    traces: list[MemoryTrace], topic_of: dict[str, int], n: int, seed: int = 4
) -> list[QuestionView]:
    rng = random.Random(seed)
    by_topic: dict[int, list[MemoryTrace]] = {}
    for t in traces:
        by_topic.setdefault(topic_of[t.trace_id], []).append(t)
    out = []
    for i in range(n):
        pool = by_topic[rng.choice(list(by_topic))]
        gold = rng.sample(pool, min(len(pool), rng.randint(1, 3)))
        when = max(g.event_date for g in gold) + dt.timedelta(days=rng.randint(0, 60))
        words = [w for g in gold for w in rng.sample(g.content.rstrip(".").split(), 6)]
        out.append(
            QuestionView(
                f"q{i}",
                "do you remember " + " ".join(words),
                when,
                tuple(g.trace_id for g in gold),
                tuple((g.content[:80], (g.trace_id,)) for g in gold),
            )
        )
    return out


def context() -> BuildContext:
    """The offline extractor, as the evaluation flow gives it to systems that extract memories."""
    from clonemem.runtime import Runtime, use
    from clonemem.schemas.config import RunConfig
    from clonemem.stages import STAGES

    rt = Runtime(RunConfig())

    def llm(name, inp):
        with use(rt):
            return STAGES.get(name).run(rt.model("extractor"), inp)

    return BuildContext(llm=llm)


def one(system: str, n_traces: int, n_build: int, n_questions: int, k: int) -> dict:
    """One system in this process: build on n_build traces, then build + n_questions queries on n_traces."""
    from clonemem.evaluation.metrics import recall_at_k
    from clonemem.memory import SYSTEMS as REGISTRY
    from clonemem.memory.embed import clear_cache

    big, _ = corpus(n_build, seed=5)
    t0 = time.perf_counter()
    REGISTRY.get(system)().build(big, context())
    build_big = time.perf_counter() - t0

    traces, topic_of = corpus(n_traces)
    qs = questions(traces, topic_of, n_questions)
    clear_cache()  # the two corpora share their first traces: time a cold build again
    memory = REGISTRY.get(system)()
    t0 = time.perf_counter()
    memory.build(traces, context())
    build = time.perf_counter() - t0
    latencies, recalls, late = [], [], 0
    dates = {t.trace_id: t.event_date for t in traces}
    for q in qs:
        t1 = time.perf_counter()
        items = memory.retrieve(q, k)
        latencies.append((time.perf_counter() - t1) * 1000)
        ids = [i for item in items for i in item.trace_ids]
        late += sum(dates[i] > q.question_time for i in ids)
        recalls.append(recall_at_k([list(q.gold_trace_ids)], ids, k)["recall_flat"])
    total = time.perf_counter() - t0
    out = {
        "system": system,
        f"build_seconds_{n_build // 1000}k": round(build_big, 2),
        "build_seconds": round(build, 2),
        "retrieve_seconds": round(total - build, 2),
        "total_seconds": round(total, 2),
        "query_p50_ms": round(float(np.percentile(latencies, 50)), 3),
        "query_p95_ms": round(float(np.percentile(latencies, 95)), 3),
        "recall_flat_at_k": round(float(np.mean(recalls)), 4),
        "items_after_question_time": late,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }
    if n_build == 6000 and n_traces == 5000 and n_questions == 1000:
        checks = {
            "build_seconds_6k": out["build_seconds_6k"],
            "total_seconds": out["total_seconds"],
            "query_p50_ms": out["query_p50_ms"],
            "query_p95_ms": out["query_p95_ms"],
        }
        out["meets_targets"] = {m: v < TARGETS[m] for m, v in checks.items()}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=5000)
    parser.add_argument("--build-traces", type=int, default=6000)
    parser.add_argument("--questions", type=int, default=1000)
    parser.add_argument("--k", type=int, default=20)
    parser.add_argument("--systems", nargs="+", default=SYSTEMS)
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: run one system in this process
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.traces, args.build_traces, args.questions, args.k)))
        return
    results = []
    for s in args.systems:
        cmd = [
            sys.executable,
            __file__,
            "--one",
            s,
            "--traces",
            str(args.traces),
            "--build-traces",
            str(args.build_traces),
            "--questions",
            str(args.questions),
            "--k",
            str(args.k),
        ]
        done = subprocess.run(cmd, capture_output=True, text=True, check=True)
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    traces, _ = corpus(args.traces)
    from clonemem.llm.types import estimate_tokens
    from clonemem.memory import embed

    print(
        json.dumps(
            {
                "benchmark": "retrieval_scale",
                "traces": args.traces,
                "build_traces": args.build_traces,
                "questions": args.questions,
                "k": args.k,
                "targets": TARGETS,
                "dense_model": embed.model_info(),
                "corpus_tokens_estimate": sum(estimate_tokens(t.content) for t in traces),
                "corpus_words": sum(len(t.content.split()) for t in traces),
                "results": results,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
