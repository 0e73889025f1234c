"""Retrieval at scale (issue: evaluation): one persona of 5,000 traces (~1M tokens) and 1,000
time-aware questions; build and retrieve at k=20 for BM25 and dense. Prints JSON with total times,
per-query p50/p95 and the process's peak memory.

The corpus is synthetic but shaped like a persona: traces over three years in eight media, drawn
from a shared vocabulary with per-topic words, so queries are neither trivial nor hopeless.

    python benchmarks/retrieval_scale.py [--traces 5000] [--questions 1000] [--systems bm25 dense]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import resource
import time

import numpy as np

from clonemem.llm.types import estimate_tokens
from clonemem.memory import SYSTEMS
from clonemem.memory.base import BuildContext, MemoryTrace, QuestionView
from clonemem.evaluation.metrics import recall_at_k

COMMON = ("today work home friend coffee morning evening call message week plan time family walk city "
          "dinner train weather tired happy busy weekend meeting project talk think feel remember").split()
MEDIA = ["diary", "social_media", "chat_private", "chat_group", "email", "memo", "search_history", "calendar_event"]


def corpus(n_traces: int, n_topics: int = 400, seed: int = 3) -> tuple[list[MemoryTrace], dict[str, int]]:
    rng = random.Random(seed)
    topics = [[f"{w}{i}" for w in ("alpha", "beta", "gamma", "delta", "omega", "sigma")] for i in range(n_topics)]
    start = dt.datetime(2022, 1, 1)
    traces, topic_of = [], {}
    for i in range(n_traces):
        topic = rng.randrange(n_topics)
        words = [rng.choice(COMMON) if rng.random() < 0.8 else rng.choice(topics[topic]) for _ in range(rng.randint(120, 190))]
        tid = f"t{i:05d}"
        traces.append(MemoryTrace(tid, rng.choice(MEDIA), start + dt.timedelta(minutes=int(i * 315)), " ".join(words) + "."))
        topic_of[tid] = topic
    return traces, topic_of


def questions(traces: list[MemoryTrace], topic_of: dict[str, int], n: int, seed: int = 4) -> list[QuestionView]:
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
        out.append(QuestionView(f"q{i}", "do you remember " + " ".join(words), when, tuple(g.trace_id for g in gold),
                                tuple((g.content[:80], (g.trace_id,)) for g in gold)))
    return out


def run(system: str, traces: list[MemoryTrace], qs: list[QuestionView], k: int) -> dict:
    memory = SYSTEMS.get(system)()
    t0 = time.perf_counter()
    memory.build(traces, BuildContext(llm=lambda *a: (_ for _ in ()).throw(RuntimeError("no LLM here"))))
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
    return {"system": system, "build_seconds": round(build, 2), "retrieve_seconds": round(total - build, 2),
            "total_seconds": round(total, 2), "query_p50_ms": round(float(np.percentile(latencies, 50)), 3),
            "query_p95_ms": round(float(np.percentile(latencies, 95)), 3), "recall_flat_at_k": round(float(np.mean(recalls)), 4),
            "items_after_question_time": late}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=5000)
    parser.add_argument("--questions", type=int, default=1000)
    parser.add_argument("--k", type=int, default=20)
    parser.add_argument("--systems", nargs="+", default=["bm25", "dense"])
    args = parser.parse_args()
    traces, topic_of = corpus(args.traces)
    qs = questions(traces, topic_of, args.questions)
    results = [run(s, traces, qs, args.k) for s in args.systems]
    targets = {"bm25": 10.0, "dense": 60.0}
    for r in results:
        if r["system"] in targets:
            r["target_total_seconds"] = targets[r["system"]]
            r["meets_target"] = r["total_seconds"] < targets[r["system"]]
    print(json.dumps({
        "benchmark": "retrieval_scale", "traces": len(traces), "questions": len(qs), "k": args.k,
        "corpus_tokens_estimate": sum(estimate_tokens(t.content) for t in traces),
        "corpus_words": sum(len(t.content.split()) for t in traces),
        "results": results, "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }, indent=2))


if __name__ == "__main__":
    main()
