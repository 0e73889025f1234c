"""Export in the release format as a Prefect task (imports are ``tasks/imports.py``)."""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import NO_CACHE

from clonemem.exporters.release import export_release
from clonemem.schemas.results import ExportResult
from clonemem.warehouse import Warehouse

# Where a `pipeline` run exports by default (the `pipeline` deployment's runs included): a folder beside the
# warehouse named after it, one subfolder per benchmark, rewritten by each run (`clonemem.duckdb` ->
# `clonemem.duckdb.release/demo/`), as the scale-out bundles default to `<warehouse>.bundles`.
DEFAULT_EXPORT = "{warehouse}.release/{name}"


def export_folder(export_dir: str, warehouse_path: str, name: str) -> str:
    """``export_dir`` with ``{warehouse}`` (the warehouse's path) and ``{name}`` (the benchmark's name)
    filled in; any other text is kept as written."""
    return export_dir.replace("{warehouse}", warehouse_path).replace("{name}", name)


@task(cache_policy=NO_CACHE, task_run_name="export {benchmark}")
def export_task(
    warehouse_path: str, benchmark: str, out_dir: str, questions_key: str = "questions"
) -> ExportResult:
    """The benchmark in the release format, one JSON file per persona."""
    with Warehouse.open_reader(warehouse_path) as wh:
        files = export_release(wh, benchmark, out_dir, questions_key)
    return ExportResult(folder=str(out_dir), files=tuple(str(f) for f in files))
