"""`clonemem demo`: the pipeline end to end on the offline default, printing where everything landed.

Generate a benchmark with the default configuration (stages I–IV), gate it, evaluate every
registered memory system on it, print a leaderboard like the paper's Tables 3–4, export it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from importlib import resources
from pathlib import Path

from clonemem import release, sqlcli
from clonemem.schemas.config import RunConfig

DEMO_BENCHMARK = "demo"
DEMO_PERSONAS = 2  # two one-year personas: enough questions for tight confidence intervals, under 5 minutes


def demo_config() -> RunConfig:
    return RunConfig.model_validate({"name": DEMO_BENCHMARK, "generation": {"personas": DEMO_PERSONAS}})


def fixture_files() -> list[Path]:
    """The packaged release fixture (a small hand-written persona in the public format)."""
    folder = resources.files("clonemem") / "data" / "demo_release"
    return sorted(Path(str(p)) for p in folder.iterdir() if p.name.endswith(".json"))


def run_demo(warehouse: Path, out: Path, echo: Callable[[str], None] = print) -> dict:
    from clonemem.cli import leaderboard
    from clonemem.flows.evaluation import evaluate_flow
    from clonemem.flows.gate import gate_flow
    from clonemem.flows.generation import run_generation
    from clonemem.flows.qa import qa_flow
    from clonemem.memory import SYSTEMS
    from clonemem.warehouse import Warehouse

    warehouse = warehouse.expanduser().resolve()
    config = demo_config()
    echo(f"[1/5] generating benchmark {DEMO_BENCHMARK!r} (stages I-III) on the offline provider into {warehouse}")
    s = run_generation(config, warehouse)
    echo(f"      {s['personas']} personas: {s['detailed_events']} detailed events, {s['evidence']} evidence, "
         f"{s['traces']} traces; {s['llm_calls']} LLM calls, {s['seconds']:.1f} s; {len(s['failures'])} failed items")
    echo("[2/5] stage IV: trajectory segments, questions, sufficiency and distractor validation")
    q = qa_flow(config.model_dump(mode="json"), str(warehouse))
    cues = q["cues"]
    echo(f"      {q['status'].get('accepted', 0)} questions accepted, {q['status'].get('rejected', 0)} rejected "
         f"(rate {q['rejection_rate']}); longest-option cue {cues['longest_option_accuracy']}, "
         f"overlap cue {cues['overlap_option_accuracy']} (chance 0.25)")
    echo("[3/5] Great Expectations gate")
    g = gate_flow(str(warehouse), DEMO_BENCHMARK)
    failed = [o for o in g["outcomes"] if not o["success"]]
    echo(f"      {g['status']}: {len(g['outcomes']) - len(failed)}/{len(g['outcomes'])} expectations; "
         f"data docs {g['data_docs']}")
    systems = [n for n in SYSTEMS.names()]
    echo(f"[4/5] evaluating {len(systems)} memory systems at k = 5, 10, 20")
    result = evaluate_flow(config.model_dump(mode="json"), str(warehouse), DEMO_BENCHMARK, systems, [5, 10, 20],
                           force=g["status"] != "passed")
    echo(_indent(leaderboard(result)))
    out.mkdir(parents=True, exist_ok=True)
    (out / "evaluation.json").write_text(json.dumps(result, indent=1, default=str), "utf-8")
    with Warehouse.open_reader(warehouse) as wh:
        echo(f"[5/5] exporting in the CloneMem release format to {out.resolve()}")
        for path in release.export_release(wh, DEMO_BENCHMARK, out / "release"):
            echo(f"      {path.resolve()}")
        echo(_indent(sqlcli.format_table(sqlcli.run(wh, "SELECT question_type, dimension, questions FROM "
                                                        "v_question_composition ORDER BY question_type, dimension")[0])))
    echo(f"      evaluation results: {(out / 'evaluation.json').resolve()}")
    echo("done. Explore further with, e.g.:")
    echo(f'  clonemem --warehouse {warehouse} sql "SELECT * FROM v_question_composition"')
    echo(f'  clonemem --warehouse {warehouse} sql "SELECT system, k, metric, value FROM eval_metrics '
         "WHERE group_by = 'all' ORDER BY system, k\"")
    return result


def _indent(text: str) -> str:
    return "\n".join("      " + line for line in text.splitlines())
