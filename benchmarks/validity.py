"""Benchmark validity (issue: evaluation): on the offline demo benchmark, the ordering that makes a
benchmark meaningful must hold — oracle > best flat retriever > random retrieval — on recall and on
choice accuracy, with non-overlapping 95% bootstrap intervals. Prints JSON.

    python benchmarks/validity.py [--k 10]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("PREFECT_HOME", tempfile.mkdtemp(prefix="clonemem-bench-prefect-"))
os.environ.setdefault("CLONEMEM_DISABLE_LIVE_LLM", "1")

from clonemem.prefect_env import configure

configure()


FLAT = ["bm25", "dense", "hybrid", "flat_combined", "flat_wo_org"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, default=10)
    args = parser.parse_args()
    from clonemem.demo import demo_config
    from clonemem.flows.pipeline import pipeline_flow

    cfg = demo_config()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "demo.duckdb"
        t0 = time.perf_counter()
        run = pipeline_flow(
            str(path), cfg, systems=["oracle", *FLAT, "random"], ks=[args.k], force=True
        )
        gate = run.gate_status
        assert run.evaluation is not None
        seconds = time.perf_counter() - t0
    rows = {r.system: r.model_dump() for r in run.evaluation.results}
    checks = {}
    for metric in ("recall_flat", "recall_any_any", "choice_accuracy"):
        best = max(FLAT, key=lambda s: rows[s][metric])
        o, f, r = rows["oracle"], rows[best], rows["random"]
        checks[metric] = {
            "oracle": [o[metric], o[f"{metric}_ci"]],
            "best_flat": best,
            "flat": [f[metric], f[f"{metric}_ci"]],
            "random": [r[metric], r[f"{metric}_ci"]],
            "oracle_above_flat": o[f"{metric}_ci"][0] > f[f"{metric}_ci"][1],
            "flat_above_random": f[f"{metric}_ci"][0] > r[f"{metric}_ci"][1],
        }
    print(
        json.dumps(
            {
                "benchmark": "validity",
                "k": args.k,
                "gate": gate,
                "questions": rows["oracle"]["n_questions"],
                "checks": checks,
                "holds": all(
                    c["oracle_above_flat"] and c["flat_above_random"] for c in checks.values()
                ),
                "pipeline_seconds": round(seconds, 1),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
