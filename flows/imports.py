"""Import as a Prefect flow: the one path of `clonemem import FORMAT`, its aliases and the deployment."""

from __future__ import annotations

from prefect import flow

from clonemem.schemas.imports import ImportMode, ImportSummary
from clonemem.tasks.imports import check_request, land_personas, parse_files, stream_files, streams


def run_import(
    format_name: str,
    paths: list[str],
    name: str,
    warehouse_path: str,
    mode: ImportMode = "create",
    wait_s: float | None = None,
) -> ImportSummary:
    """Parse every file (cached per content), then land them all or nothing (inside a flow run)."""
    check_request(format_name, name)
    if streams(format_name):  # a file too big to hold: landed in batches as it is read
        return stream_files(warehouse_path, format_name, paths, name, mode, wait_s)
    return land_personas(warehouse_path, parse_files(format_name, paths), name, mode, wait_s)


@flow(name="import", log_prints=False)
def import_flow(
    format_name: str,
    paths: list[str],
    name: str,
    warehouse_path: str,
    mode: ImportMode = "create",
    wait_s: float | None = None,
) -> ImportSummary:
    """Load files of a registered format (``clonemem.importers.IMPORTERS``) as benchmark ``name``;
    ``wait_s``: how long to wait for another writer of the warehouse (default: the lock's)."""
    return run_import(format_name, paths, name, warehouse_path, mode, wait_s)
