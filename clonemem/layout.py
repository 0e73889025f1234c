"""Where the code of the `clonemem` package lives in the repository: `clonemem/` itself, and the
architecture's top-level folders, each installed as a sub-package (`flows/` is `clonemem.flows`) by
`package-dir` in pyproject.toml (`tests/test_layers.py` keeps the two equal).

A module has one name, `clonemem.…`: the folders are never imported under their own top-level name
(that would be a second module object, whose registries register twice). The repository's tools
and tests read the mapping from here, not from copies of the list.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

PACKAGE = "clonemem"
# the top-level folders mapped into the package, each as `clonemem.<folder>`
MAPPED: tuple[str, ...] = ("flows", "tasks", "schemas", "expectations", "warehouse", "prompts")
# every folder of the product's code, as laid out in the repository
SOURCES: tuple[str, ...] = (PACKAGE, *MAPPED)


def module_name(rel: str | PurePosixPath | Path) -> str:
    """The module of a source file, by its path in the repository: `flows/qa.py` ->
    `clonemem.flows.qa`, `clonemem/memory/__init__.py` -> `clonemem.memory`."""
    parts = PurePosixPath(*Path(rel).with_suffix("").parts).parts
    if parts and parts[0] in MAPPED:
        parts = (PACKAGE, *parts)
    return ".".join(p for p in parts if p != "__init__")


def repo_path(module: str) -> str:
    """Where a module's code is, without the suffix: `clonemem.flows.qa` -> `flows/qa`,
    `clonemem.memory.base` -> `clonemem/memory/base`."""
    parts = module.split(".")
    if len(parts) > 1 and parts[0] == PACKAGE and parts[1] in MAPPED:
        parts = parts[1:]
    return "/".join(parts)
