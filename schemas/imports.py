"""What an import reports: its mode, the notes it made, and the summary the import flow returns."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Literal

ImportMode = Literal["create", "replace", "append"]


@dataclass(frozen=True)
class ImportNote:
    """Something an import repaired or could not resolve; reported and stored, never dropped."""

    file: str
    path: str
    kind: str  # split, normalised, unresolved, duplicate_turn, ...
    raw: str | None
    resolved: str | None = None

    def __str__(self) -> str:
        what = f"{self.raw!r} -> {self.resolved!r}" if self.resolved is not None else repr(self.raw)
        return f"{self.file}: {self.path}: {self.kind} {what}"


@dataclass(frozen=True)
class ImportSummary:
    benchmark_id: str
    name: str
    personas: int  # what this import added
    traces: int
    questions: int
    free_text_only: int
    unknown_question_types: dict[str, int]
    evidence_without_traces: int
    mode: str = "created"  # created, replaced, appended
    total_personas: int = 0  # the benchmark after the import
    total_traces: int = 0
    total_questions: int = 0
    languages: dict[str, int] = field(default_factory=dict)
    relabelled: dict[str, int] = field(default_factory=dict)  # "inference -> inferential": n
    questions_without_evidence: int = 0
    notes: tuple[ImportNote, ...] = ()

    @property
    def note_counts(self) -> dict[str, int]:
        return dict(sorted(Counter(n.kind for n in self.notes).items()))
