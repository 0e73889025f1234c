"""Release import as Prefect tasks: parsing is cached on the file's content, landing is not."""

from __future__ import annotations

from pathlib import Path

from prefect import task
from prefect.cache_policies import INPUTS, TASK_SOURCE

from clonemem import release
from clonemem.schemas.release import ReleaseFile
from clonemem.warehouse import Warehouse


@task(cache_policy=INPUTS + TASK_SOURCE, persist_result=True, task_run_name="parse {file_name}")
def parse_release(data: bytes, file_name: str) -> ReleaseFile:
    """Parse and check one release file (keyed on its bytes, so an edited file is parsed again)."""
    return release.parse_release_text(data, file_name)


@task(task_run_name="land {name}")
def land_releases(warehouse_path: str, parsed: list[tuple[str, ReleaseFile]], name: str) -> release.ImportSummary:
    """Write the parsed files as one benchmark, in one transaction, from this process's writer."""
    with Warehouse.open_writer(Path(warehouse_path)) as wh:
        return release.load_releases(wh, parsed, name)
