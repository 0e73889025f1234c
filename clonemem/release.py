"""Compatibility names for code written before importers had a home of their own.

The release importer is ``clonemem/importers/release.py``, what every importer shares is
``clonemem/importers/base.py``, and the exporter is ``clonemem/exporters/release.py``; new code
imports from there. Nothing is defined here.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from clonemem.exporters.release import export_file_names, export_persona, export_release
from clonemem.ids import content_id
from clonemem.importers import import_files
from clonemem.importers.base import (
    MAX_REPORTED_PROBLEMS,
    ImportFailed,
    ImportMode,
    ImportNote,
    ImportSummary,
    ParsedPersona,
    Problem,
    decode_text,
    detect_language,
    expand_paths,
    import_into_warehouse,
    json_path,
    load_personas,
    persona_rows,
    read_text,
)
from clonemem.importers.locomo import CATEGORIES as LOCOMO_CATEGORIES
from clonemem.importers.locomo import project_type as _locomo_type
from clonemem.importers.release import (
    check_references,
    parse_release_paths,
    parse_release_persona,
    parse_release_text,
)
from clonemem.warehouse import Warehouse

ReleaseError = ImportFailed
decode_json_bytes = decode_text
read_json_text = read_text


def parse_release_file(path: str | Path):
    return parse_release_persona(path).release


def canonical_question_type(label: str, locomo_category: int | None = None) -> str:
    return _locomo_type(locomo_category, label)


def import_release_files(wh: Warehouse, paths: Sequence[str | Path], name: str,
                         mode: ImportMode = "create") -> ImportSummary:
    """Parse every file first (collecting all problems), then load them all or nothing."""
    return import_files(wh, "release", paths, name, mode)


__all__ = ["LOCOMO_CATEGORIES", "MAX_REPORTED_PROBLEMS", "ImportMode", "ImportNote", "ImportSummary",
           "ParsedPersona", "Problem", "ReleaseError", "canonical_question_type", "check_references", "content_id",
           "decode_json_bytes", "detect_language", "expand_paths", "export_file_names", "export_persona",
           "export_release", "import_into_warehouse", "import_release_files", "json_path", "load_personas",
           "parse_release_file", "parse_release_paths", "parse_release_persona", "parse_release_text",
           "persona_rows", "read_json_text"]
