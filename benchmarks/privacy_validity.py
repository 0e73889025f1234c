"""Privacy validity (issue 23, after LifeSide): on the offline demo benchmark, the boundary-aware baseline
(``bm25_boundary``: retrieval only from traces whose audience included the recipient) must violate
privacy less often than the same retriever unfiltered (``bm25``), with disjoint 95% bootstrap intervals,
and the oracle, which hands the clone every relevant trace, must show a high violation rate. Completeness
is reported beside violation (the tension LifeSide measures). Prints JSON.

    python benchmarks/privacy_validity.py [--k 10] [--config configs/demo.toml]
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

SYSTEMS = ["oracle", "bm25", "bm25_boundary"]
HIGH = 0.5  # the oracle's violation rate must reach at least this


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--config", default=None, help="a run config (default: the demo's)")
    args = parser.parse_args()
    from clonemem.demo import demo_config
    from clonemem.flows.pipeline import pipeline_flow
    from clonemem.schemas.config import load_config

    cfg = load_config(args.config) if args.config else demo_config()
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        run = pipeline_flow(
            str(Path(tmp) / "demo.duckdb"), cfg, systems=SYSTEMS, ks=[args.k], force=True
        )
        seconds = time.perf_counter() - t0
    assert run.evaluation is not None
    scores = {r.system: r.privacy for r in run.evaluation.results}
    families = {
        f"{t.system}/{t.question_type}": {
            "violation": t.privacy.privacy_violation,
            "completeness": t.privacy.privacy_completeness,
            "n": t.privacy.n,
        }
        for t in run.evaluation.by_question_type
        if t.privacy.n
    }

    def figure(system: str) -> dict:
        p = scores[system]
        return {
            m: [getattr(p, m), p.ci.get(m)]
            for m in ("privacy_violation", "privacy_leak_share", "privacy_completeness")
        } | {"tasks": p.n}

    viol = {s: (scores[s].privacy_violation, scores[s].ci["privacy_violation"]) for s in SYSTEMS}
    checks = {
        "boundary_below_unfiltered": viol["bm25_boundary"][1][1] < viol["bm25"][1][0],
        "oracle_high": viol["oracle"][0] >= HIGH,
        "oracle_above_boundary": viol["oracle"][1][0] > viol["bm25_boundary"][1][1],
    }
    print(
        json.dumps(
            {
                "benchmark": "privacy_validity",
                "config": cfg.name,
                "k": args.k,
                "gate": run.gate_status,
                "questions": run.evaluation.results[0].n_questions,
                "systems": {s: figure(s) for s in SYSTEMS},
                "by_family": families,
                "checks": checks,
                "holds": all(checks.values()),
                "pipeline_seconds": round(seconds, 1),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
