"""`clonemem demo`: the pipeline end to end on the offline default.

Today: import the packaged release fixture through the Prefect import flow, show counts and a SQL
query, export it again. Generation, the gate and evaluation join as their stages land.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import resources
from pathlib import Path

from clonemem import release, sqlcli

DEMO_BENCHMARK = "demo-release"


def fixture_files() -> list[Path]:
    folder = resources.files("clonemem") / "data" / "demo_release"
    return sorted(Path(str(p)) for p in folder.iterdir() if p.name.endswith(".json"))


def run_demo(warehouse: Path, out: Path, echo: Callable[[str], None] = print) -> None:
    from clonemem.flows.release import import_release_flow
    from clonemem.warehouse import Warehouse

    warehouse = warehouse.expanduser().resolve()
    echo(f"[1/3] importing the demo release fixture through the Prefect flow into {warehouse}")
    summary = import_release_flow([str(p) for p in fixture_files()], DEMO_BENCHMARK, str(warehouse))
    echo(f"      benchmark {summary.name!r}: {summary.personas} persona, {summary.traces} traces, "
         f"{summary.questions} questions ({summary.free_text_only} free-text only)")

    with Warehouse.open_reader(warehouse) as wh:
        echo("[2/3] composition (SQL over the warehouse: SELECT * FROM v_question_composition)")
        query = ("SELECT question_type, question_type_known AS known, dimension, questions, multiple_choice "
                 f"FROM v_question_composition WHERE benchmark = '{DEMO_BENCHMARK}' ORDER BY question_type")
        for result in sqlcli.run(wh, query):
            echo(_indent(sqlcli.format_table(result)))
        media = sqlcli.run(wh, "SELECT medium, traces FROM v_trace_media "
                               f"WHERE benchmark = '{DEMO_BENCHMARK}' ORDER BY traces DESC, medium")
        echo(_indent(sqlcli.format_table(media[0])))
        echo(f"[3/3] exporting in the CloneMem release format to {out.resolve()}")
        for path in release.export_release(wh, DEMO_BENCHMARK, out):
            echo(f"      {path}")
    echo("done. Explore further with, e.g.:")
    echo(f'  clonemem --warehouse {warehouse} sql "SELECT medium, count(*) FROM traces GROUP BY medium"')


def _indent(text: str) -> str:
    return "\n".join("      " + line for line in text.splitlines())
