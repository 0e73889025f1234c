"""Import as Prefect tasks: parsing is cached on the file's content, landing is not."""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import INPUTS, TASK_SOURCE

from clonemem import locomo, release


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
