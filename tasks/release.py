"""Import and export as Prefect tasks: parsing is cached on the file's content, landing is not."""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import INPUTS, NO_CACHE, TASK_SOURCE

from clonemem import locomo, release
from clonemem.schemas.results import ExportResult
from clonemem.warehouse import Warehouse


@task(cache_policy=INPUTS + TASK_SOURCE, persist_result=True, task_run_name="parse {file_name}")
def parse_release(data: bytes, file_name: str) -> release.ParsedPersona:
    """Parse and check one release file (keyed on its bytes, so an edited file is parsed again)."""
    return release.parse_release_persona(file_name, release.decode_json_bytes(data, file_name))


@task(cache_policy=INPUTS + TASK_SOURCE, persist_result=True, task_run_name="parse LoCoMo {file_name}")
def parse_locomo(data: bytes, file_name: str) -> list[release.ParsedPersona]:
    """Every conversation of one LoCoMo file (keyed on its bytes)."""
    return locomo.parse_locomo_text(release.decode_json_bytes(data, file_name), file_name)


@task(task_run_name="land {name}")
def land_personas(warehouse_path: str, parsed: list[release.ParsedPersona], name: str,
                  mode: release.ImportMode = "create") -> release.ImportSummary:
    """Write the parsed personas as one benchmark, in one transaction, from this process's writer."""
    return release.import_into_warehouse(warehouse_path, lambda: parsed, name, mode)


@task(cache_policy=NO_CACHE, task_run_name="export {benchmark}")
def export_task(warehouse_path: str, benchmark: str, out_dir: str, questions_key: str = "questions") -> ExportResult:
    """The benchmark in the release format, one JSON file per persona."""
    with Warehouse.open_reader(warehouse_path) as wh:
        files = release.export_release(wh, benchmark, out_dir, questions_key)
    return ExportResult(folder=str(out_dir), files=tuple(str(f) for f in files))
