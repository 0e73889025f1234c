"""Superficial-cue check of the offline demo benchmark (issue: stage IV). Prints JSON.

Generates the demo benchmark (or reuses the cache), runs stage IV and reports, over accepted
multiple-choice items: the accuracy of always picking the longest option, of the option with most
word overlap with the question, the correct-letter distribution, and the blind validator's accuracy
(its final-round answer from question and options alone). Chance is 25% among A–D.

    python benchmarks/qa_cues.py [--seeds 42 7 11]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

os.environ.setdefault("PREFECT_HOME", tempfile.mkdtemp(prefix="clonemem-bench-prefect-"))
os.environ.setdefault("CLONEMEM_DISABLE_LIVE_LLM", "1")

from clonemem.prefect_env import configure

configure()

from clonemem.schemas.config import RunConfig  # noqa: E402
from clonemem.warehouse import Warehouse  # noqa: E402

BLIND_ACCURACY = """
SELECT count(*) AS items,
       avg((json_extract_string(c.detail, '$.picked') = q.correct_choice_id)::INT) AS accuracy
FROM questions q JOIN qa_checks c USING (question_id)
WHERE c.check_name = 'distractor_blind' AND q.correct_choice_id <> 'E'
  AND c.round = (SELECT max(round) FROM qa_distractor_rounds r WHERE r.question_id = q.question_id)
"""


def one(seed: int, tmp: Path) -> dict:
    from clonemem.flows.pipeline import pipeline_flow

    cfg = RunConfig(name=f"demo-{seed}", seed=seed)
    path = tmp / f"demo-{seed}.duckdb"
    run = pipeline_flow(str(path), cfg, evaluate=False, force=True)
    qa = run.qa.model_dump()
    with Warehouse.open_reader(path) as wh:
        items, blind = wh.rows(BLIND_ACCURACY)[0]
    margin = cfg.gate.heuristic_margin
    cues = qa["cues"]
    return {
        "seed": seed,
        "accepted": qa["status"].get("accepted", 0),
        "rejected": qa["status"].get("rejected", 0),
        "rejection_rate": qa["rejection_rate"],
        "rejected_by": qa["rejected_by"],
        "by_type": qa["by_type"],
        "longest_option_accuracy": cues["longest_option_accuracy"],
        "overlap_option_accuracy": cues["overlap_option_accuracy"],
        "correct_letter_distribution": cues["correct_letter_distribution"],
        "blind_validator_items": items,
        "blind_validator_accuracy": round(blind, 4) if blind is not None else None,
        "chance": 0.25,
        "margin": margin,
        "within_margin": all(
            abs(v - 0.25) <= margin
            for v in (cues["longest_option_accuracy"], cues["overlap_option_accuracy"], blind)
        ),
        "gate": run.gate_status,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[42, 7, 11])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        runs = [one(seed, Path(tmp)) for seed in args.seeds]
    pooled = {
        k: round(sum(r[k] for r in runs) / len(runs), 4)
        for k in ("longest_option_accuracy", "overlap_option_accuracy", "blind_validator_accuracy")
    }
    print(json.dumps({"benchmark": "qa_cues", "runs": runs, "mean_over_seeds": pooled}, indent=2))


if __name__ == "__main__":
    main()
