"""Importers: one module per source format, found by name.

``IMPORTERS`` maps a format's name (``clonemem import NAME PATH...``) to its :class:`Importer`
subclass; the built-ins are registered lazily, and other packages add formats with an entry point in
the group ``clonemem.importers`` (see docs/architecture.md, "Add an importer").
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from clonemem.importers.base import Importer, ImportFailed, ParsedPersona, Problem, QuestionSource
from clonemem.registry import Registry
from clonemem.schemas.imports import ImportMode, ImportSummary

if TYPE_CHECKING:
    from clonemem.warehouse import Warehouse

IMPORTERS: Registry[type[Importer]] = Registry(
    "importer",
    entry_point_group="clonemem.importers",
    accepts=lambda c: isinstance(c, type) and issubclass(c, Importer),
    expected="an Importer subclass",
)
IMPORTERS.add_lazy("release", "clonemem.importers.release:ReleaseImporter")
IMPORTERS.add_lazy("locomo", "clonemem.importers.locomo:LocomoImporter")
IMPORTERS.add_lazy("longmemeval", "clonemem.importers.longmemeval:LongMemEvalImporter")
IMPORTERS.add_lazy("personamem", "clonemem.importers.personamem:PersonaMemImporter")


def importer(name: str) -> Importer:
    """The importer registered as ``name`` (an unknown name is a :class:`RegistryError` naming the known ones)."""
    found = IMPORTERS.get(name)
    return found() if isinstance(found, type) else found


__all__ = [
    "IMPORTERS",
    "ImportFailed",
    "Importer",
    "ParsedPersona",
    "Problem",
    "QuestionSource",
    "import_files",
    "importer",
]


def import_files(
    wh: Warehouse,
    format_name: str,
    paths: Sequence[str | Path],
    name: str,
    mode: ImportMode = "create",
) -> ImportSummary:
    """Parse every file with the named importer (collecting all problems), then land them all or nothing
    into an open warehouse (library use; the CLI and deployments run the import flow)."""
    from clonemem.importers.base import StreamingImporter, expand_paths, load_personas, load_stream

    found = importer(format_name)
    if isinstance(found, StreamingImporter):  # never held whole: landed in batches as it is read
        return load_stream(wh, found, expand_paths(paths, found.suffixes), name, mode)
    return load_personas(wh, found.parse_paths(paths), name, mode)
