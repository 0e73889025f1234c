"""`clonemem demo`: the pipeline end to end on the offline default, printing where everything landed.

Generate a benchmark with the default configuration (stages I–IV), gate it, evaluate every
registered memory system on it, print a leaderboard like the paper's Tables 3–4, export it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from importlib import resources
from pathlib import Path

from clonemem import sqlcli
from clonemem.schemas.config import RunConfig
from clonemem.schemas.results import PipelineResult

DEMO_BENCHMARK = "demo"
DEMO_PERSONAS = (
    2  # two one-year personas: enough questions for tight confidence intervals, under 5 minutes
)


def demo_config() -> RunConfig:
    return RunConfig.model_validate(
        {"name": DEMO_BENCHMARK, "generation": {"personas": DEMO_PERSONAS}}
    )


def fixture_files() -> list[Path]:
    """The packaged release fixture (a small hand-written persona in the public format)."""
    folder = resources.files("clonemem") / "data" / "demo_release"
    return sorted(Path(str(p)) for p in folder.iterdir() if p.name.endswith(".json"))


def run_demo(warehouse: Path, out: Path, echo: Callable[[str], None] = print) -> PipelineResult:
    """The `pipeline` flow on the demo config, every registered system at k = 5, 10, 20, exported to ``out``."""
    from clonemem.evaluation.report import leaderboard
    from clonemem.flows.pipeline import pipeline_flow
    from clonemem.memory import SYSTEMS
    from clonemem.warehouse import Warehouse

    warehouse = warehouse.expanduser().resolve()
    systems = SYSTEMS.names()
    echo(
        f"running the pipeline on the offline provider into {warehouse}: generate {DEMO_BENCHMARK!r} (stages I-IV), "
        f"gate it, evaluate {len(systems)} memory systems at k = 5, 10, 20, export"
    )
    result = pipeline_flow(
        str(warehouse),
        demo_config(),
        systems=systems,
        ks=[5, 10, 20],
        force=True,
        export_dir=str(out / "release"),
    )
    s, q = result.generation, result.qa
    echo(
        f"[1/5] generation: {s.personas} personas: {s.detailed_events} detailed events, {s.evidence} evidence, "
        f"{s.traces} traces; {s.llm_calls} LLM calls, {s.seconds:.1f} s; {len(s.failures)} failed items"
    )
    echo(
        f"[2/5] stage IV: {q.accepted} questions accepted, {q.status.get('rejected', 0)} rejected "
        f"(rate {q.rejection_rate}); longest-option cue {q.cues.longest_option_accuracy}, "
        f"overlap cue {q.cues.overlap_option_accuracy} (chance 0.25)"
    )
    echo(
        f"[3/5] Great Expectations gate: {result.gate_status}"
        + (f" (evaluated anyway: {'; '.join(result.gate_failed)})" if result.gate_failed else "")
    )
    assert result.evaluation is not None and result.export is not None
    echo(f"[4/5] evaluation of {len(systems)} memory systems")
    echo(_indent(leaderboard(result.evaluation)))
    out.mkdir(parents=True, exist_ok=True)
    (out / "evaluation.json").write_text(
        json.dumps(result.evaluation.model_dump(mode="json"), indent=1), "utf-8"
    )
    echo(f"[5/5] exported in the CloneMem release format to {Path(result.export.folder).resolve()}")
    for path in result.export.files:
        echo(f"      {Path(path).resolve()}")
    with Warehouse.open_reader(warehouse) as wh:
        echo(
            _indent(
                sqlcli.format_table(
                    sqlcli.run(
                        wh,
                        "SELECT question_type, dimension, questions FROM "
                        "v_question_composition ORDER BY question_type, dimension",
                    )[0]
                )
            )
        )
    echo(f"      evaluation results: {(out / 'evaluation.json').resolve()}")
    echo("done. Explore further with, e.g.:")
    echo(f'  clonemem --warehouse {warehouse} sql "SELECT * FROM v_question_composition"')
    echo(
        f'  clonemem --warehouse {warehouse} sql "SELECT system, k, metric, value FROM eval_metrics '
        "WHERE group_by = 'all' ORDER BY system, k\""
    )
    echo(f"  clonemem --warehouse {warehouse} dashboard")
    return result


def _indent(text: str) -> str:
    return "\n".join("      " + line for line in text.splitlines())
