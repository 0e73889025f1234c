"""Import release files and LoCoMo conversations as Prefect flows."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from prefect import flow

from clonemem import release
from clonemem.tasks.release import land_personas, parse_locomo, parse_release


def _parse_all(paths: list[str], parse: Callable[[bytes, str], object]) -> list[release.ParsedPersona]:
    problems, parsed = [], []
    for path in release.expand_paths(paths):
        try:
            got = parse(Path(path).read_bytes(), str(path))
        except OSError as exc:
            problems.append(release.Problem(str(path), "$", f"cannot read file: {exc.strerror or exc}"))
            continue
        except release.ReleaseError as exc:
            problems.extend(exc.problems)
            continue
        parsed.extend(got if isinstance(got, list) else [got])
    if problems:
        raise release.ReleaseError(problems)
    return parsed


@flow(name="import-release", log_prints=False)
def import_release_flow(paths: list[str], name: str, warehouse_path: str,
                        mode: release.ImportMode = "create") -> release.ImportSummary:
    """Parse every file (cached per content), then land them all or nothing."""
    return land_personas(warehouse_path, _parse_all(paths, parse_release), name, mode)


@flow(name="import-locomo", log_prints=False)
def import_locomo_flow(paths: list[str], name: str, warehouse_path: str,
                       mode: release.ImportMode = "create") -> release.ImportSummary:
    """Parse every LoCoMo file (cached per content), then land all conversations or none."""
    return land_personas(warehouse_path, _parse_all(paths, parse_locomo), name, mode)
