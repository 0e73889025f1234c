"""`clonemem demo`: the pipeline end to end on the offline default, printing where everything landed.

Today: generate a benchmark (stages I–III) with the default configuration, query it with SQL,
export it in the release format. The gate and evaluation join as their stages land.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import resources
from pathlib import Path

from clonemem import release, sqlcli
from clonemem.schemas.config import RunConfig

DEMO_BENCHMARK = "demo"


def fixture_files() -> list[Path]:
    """The packaged release fixture (a small hand-written persona in the public format)."""
    folder = resources.files("clonemem") / "data" / "demo_release"
    return sorted(Path(str(p)) for p in folder.iterdir() if p.name.endswith(".json"))


def run_demo(warehouse: Path, out: Path, echo: Callable[[str], None] = print) -> None:
    from clonemem.flows.generation import run_generation
    from clonemem.warehouse import Warehouse

    warehouse = warehouse.expanduser().resolve()
    config = RunConfig(name=DEMO_BENCHMARK)
    echo(f"[1/3] generating benchmark {DEMO_BENCHMARK!r} on the offline provider into {warehouse}")
    s = run_generation(config, warehouse)
    echo(f"      {s['personas']} persona: {s['detailed_events']} detailed events, {s['evidence']} evidence, "
         f"{s['traces']} traces; {s['llm_calls']} LLM calls ({'cached re-run' if not s['llm_calls'] else 'fresh'}), "
         f"{s['seconds']:.1f} s; {len(s['failures'])} failed items")
    with Warehouse.open_reader(warehouse) as wh:
        echo("[2/3] what landed (SQL over the warehouse)")
        queries = [
            "SELECT medium, traces, noise_traces FROM v_trace_media "
            f"WHERE benchmark = '{DEMO_BENCHMARK}' ORDER BY traces DESC, medium",
            "SELECT a.dimension, a.title, count(DISTINCT ea.evidence_id) AS evidence "
            "FROM life_arcs a JOIN evidence_arcs ea USING (arc_id) JOIN personas p USING (persona_id) "
            f"WHERE p.benchmark_id = (SELECT benchmark_id FROM benchmarks WHERE name = '{DEMO_BENCHMARK}') "
            "GROUP BY ALL ORDER BY a.dimension",
            "SELECT stage, calls, attempts, input_tokens, output_tokens FROM v_llm_spend "
            "WHERE run_id = (SELECT run_id FROM runs WHERE kind = 'generate' ORDER BY started_at DESC LIMIT 1) "
            "ORDER BY calls DESC LIMIT 6",
        ]
        for query in queries:
            for result in sqlcli.run(wh, query):
                echo(_indent(sqlcli.format_table(result)))
        echo(f"[3/3] exporting in the CloneMem release format to {out.resolve()}")
        for path in release.export_release(wh, DEMO_BENCHMARK, out):
            echo(f"      {path.resolve()}")
    echo("done. Explore further with, e.g.:")
    echo(f'  clonemem --warehouse {warehouse} sql "SELECT * FROM v_question_composition"')
    echo(f'  clonemem --warehouse {warehouse} sql "SELECT medium, content FROM traces LIMIT 5"')


def _indent(text: str) -> str:
    return "\n".join("      " + line for line in text.splitlines())
