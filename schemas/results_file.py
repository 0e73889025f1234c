"""The results-file format: a memory system's retrievals (and, optionally, answers) made elsewhere, one JSON
object per line and per question, in the ids of the release files (`clonemem export-release`).

    {"question_id": "q01", "items": [{"trace_ids": ["t04"], "text": "..."}], "choice": "B", "answer": "..."}

Unknown fields are ignored; types are strict. Documented in the README ("Evaluating your own memory system").
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from clonemem.schemas.results import EvaluationResult

CHOICE_IDS = ("A", "B", "C", "D", "E")


class ResultsFileError(ValueError):
    """A results file that cannot be scored (malformed, or naming what the benchmark does not have), or an
    export that cannot be made; the message is one line saying what and where."""


class _Line(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True, frozen=True)


class FileItem(_Line):
    """One retrieved item, in rank order: the release trace ids it came from and the text the answerer reads."""

    trace_ids: list[str]
    text: str
    # Optional. ``trace``, ``note`` and ``statement`` items carry their traces' text, so provenance alone
    # says they hold the evidence; any other kind (the default, ``memory``) is a transformation that the
    # judge's support check (stage ``eval.support``) must find states the evidence.
    kind: str = Field(default="memory", min_length=1)


class FileLine(_Line):
    # "MAJOR.MINOR" (schemas/versions.py: RESULTS_FILE), on every line `export-retrievals` writes; optional
    format_version: str | None = None
    question_id: str = Field(min_length=1)
    items: list[FileItem]
    choice: Literal["A", "B", "C", "D", "E"] | None = None  # replaces the answerer's choice
    answer: str | None = None  # replaces the answerer's free-text answer (the judge scores it)
    # Optional: did the system's memory hold every gold evidence item at question time (its own write
    # diagnosis)? Without it the write step is not diagnosed: write_failure is blank.
    written: bool | None = None
    # Only when a question id occurs in several personas of the benchmark: which one (the release file's
    # ``person_id``, and the language when one person is in several languages).
    person_id: str | None = None
    language: str | None = None


class ResultsFileScored(BaseModel):
    """A results file scored on a benchmark: the evaluation and what was read."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    evaluation: EvaluationResult
    system: str
    file: str
    sha256: str
    lines: int
    missing: (
        int  # benchmark questions without a line, scored as retrieving nothing (--allow-missing)
    )
    ks: tuple[int, ...]
