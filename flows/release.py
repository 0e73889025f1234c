"""The import flows of the two built-in formats by their earlier names (deployments and scripts that
use them keep working); both run the tasks of ``flows/imports.py``."""

from __future__ import annotations

from prefect import flow

from clonemem.flows.imports import run_import
from clonemem.schemas.imports import ImportMode, ImportSummary


@flow(name="import-release", log_prints=False)
def import_release_flow(paths: list[str], name: str, warehouse_path: str,
                        mode: ImportMode = "create") -> ImportSummary:
    """Parse every release file (cached per content), then land them all or nothing."""
    return run_import("release", paths, name, warehouse_path, mode)


@flow(name="import-locomo", log_prints=False)
def import_locomo_flow(paths: list[str], name: str, warehouse_path: str,
                       mode: ImportMode = "create") -> ImportSummary:
    """Parse every LoCoMo file (cached per content), then land all conversations or none."""
    return run_import("locomo", paths, name, warehouse_path, mode)
