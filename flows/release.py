"""Import release files as a Prefect flow."""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from clonemem import release
from clonemem.tasks.release import land_releases, parse_release


@flow(name="import-release", log_prints=False)
def import_release_flow(paths: list[str], name: str, warehouse_path: str) -> release.ImportSummary:
    """Parse every file (cached per content), then land them all or nothing."""
    problems, parsed = [], []
    for path in paths:
        try:
            data = Path(path).read_bytes()
        except OSError as exc:
            problems.append(release.Problem(path, "$", f"cannot read file: {exc.strerror or exc}"))
            continue
        try:
            parsed.append((path, parse_release(data, path)))
        except release.ReleaseError as exc:
            problems.extend(exc.problems)
    if problems:
        raise release.ReleaseError(problems)
    return land_releases(warehouse_path, parsed, name)
