"""Compatibility names for code written before importers had a home of their own: the LoCoMo importer
is ``clonemem/importers/locomo.py``; new code imports from there. Nothing is defined here."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from clonemem.importers import import_files
from clonemem.importers.locomo import (
    CATEGORIES,
    DIMENSION,
    MEDIUM,
    NOT_MENTIONED,
    LocomoImporter,
    LocomoQA,
    LocomoTurn,
    canonical_turn_id,
    parse_locomo_paths,
    parse_locomo_text,
    parse_session_date,
)
from clonemem.schemas.imports import ImportMode, ImportSummary
from clonemem.warehouse import Warehouse


def import_locomo_files(wh: Warehouse, paths: Sequence[str | Path], name: str,
                        mode: ImportMode = "create") -> ImportSummary:
    return import_files(wh, "locomo", paths, name, mode)


__all__ = ["CATEGORIES", "DIMENSION", "MEDIUM", "NOT_MENTIONED", "LocomoImporter", "LocomoQA", "LocomoTurn",
           "canonical_turn_id", "import_locomo_files", "parse_locomo_paths", "parse_locomo_text",
           "parse_session_date"]
