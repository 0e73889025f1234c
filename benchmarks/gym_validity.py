"""Gym validity (on-policy evaluation): on the base preset (N_p, N_s, N_i = 10, 2, 4) with the offline
world, the assistant handed the true states scores at the upper bound, the assistant with no memory at
the random bound (the bound inside its 95% interval), and memory systems in between, each interval
disjoint from both controls'. Prints JSON; exits 1 when a check fails.

    python benchmarks/gym_validity.py [--personas 2] [--full-context-tokens 300]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("PREFECT_HOME", tempfile.mkdtemp(prefix="clonemem-bench-prefect-"))
os.environ.setdefault("CLONEMEM_DISABLE_LIVE_LLM", "1")

from clonemem.prefect_env import configure

configure()

BASE = Path(__file__).resolve().parent.parent / "configs" / "gym-base.toml"
CONTROLS = ["oracle_states", "no_memory"]
# full_context reads the newest turns under a token budget: cut to a few sessions, it remembers the
# recent states and forgets the older ones (with the default budget the whole offline history fits)
MEMORIES = ["bm25", "full_context", "random"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--personas", type=int, default=2)
    parser.add_argument("--full-context-tokens", type=int, default=300)
    args = parser.parse_args()
    from clonemem.flows.gym import gym_flow
    from clonemem.schemas.config import load_config

    cfg = load_config(BASE)
    cfg = cfg.model_copy(
        update={
            "generation": cfg.generation.model_copy(update={"personas": args.personas}),
            "evaluation": cfg.evaluation.model_copy(
                update={"full_context_tokens": args.full_context_tokens}
            ),
        }
    )
    started = time.perf_counter()
    result = gym_flow(None, [*CONTROLS, *MEMORIES], cfg)
    by = {d.system: d for d in result.systems}
    random_bound, upper = result.report.bounds.random, result.report.bounds.upper
    oracle, none = by["oracle_states"], by["no_memory"]
    checks = {
        "gate_passed": result.exposure_rate >= cfg.gym.min_exposure_rate,
        "oracle_states_at_upper_bound": abs(oracle.accuracy - upper) <= 0.02,
        "no_memory_at_random_bound": none.accuracy_ci[0] <= random_bound <= none.accuracy_ci[1],
        **{
            f"{m}_between_disjoint": none.accuracy_ci[1] < by[m].accuracy_ci[0]
            and by[m].accuracy_ci[1] < oracle.accuracy_ci[0]
            for m in MEMORIES
        },
    }
    out = {
        "config": str(BASE.name),
        "personas": args.personas,
        "periods": cfg.gym.periods,
        "states_per_question": cfg.gym.states_per_question,
        "turns_per_exposure": cfg.gym.turns_per_exposure,
        "full_context_tokens": args.full_context_tokens,
        "exposure_rate": result.exposure_rate,
        "bounds": {"random": random_bound, "upper": upper},
        "systems": {
            d.system: {
                "accuracy": d.accuracy,
                "accuracy_ci": list(d.accuracy_ci),
                "memory_score": d.memory_score,
                "off_policy_memory_score": d.off_policy_memory_score,
                "diagnosis": d.diagnosis,
            }
            for d in result.systems
        },
        "rank_change": [r.model_dump() for r in result.report.rank_change],
        "checks": checks,
        "holds": all(checks.values()),
        "llm_calls": result.llm_calls,
        "seconds": round(time.perf_counter() - started, 1),
    }
    print(json.dumps(out, indent=1))
    sys.exit(0 if out["holds"] else 1)


if __name__ == "__main__":
    main()
