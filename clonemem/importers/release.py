"""The CloneMem release format (the README, "Release format"): one JSON file per persona.

Its fields are the release schema (``schemas/release.py``); its question types are the project's,
under the published files' own labels where they differ (``inference`` → ``inferential``, declared
as aliases in ``schemas/question_types.py``). A file this project exported from a benchmark imported
from another format carries that format's extras per question (see :class:`_ExportedQuestion`), read
back here so such a benchmark survives the trip.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

from pydantic import ValidationError

from clonemem.importers import locomo
from clonemem.importers.base import (
    Importer,
    ImportFailed,
    ParsedPersona,
    Problem,
    QuestionSource,
    decode_text,
    detect_language,
    json_path,
    read_text,
    validation_message,
)
from clonemem.schemas import question_types
from clonemem.schemas.release import QUESTION_KEYS, ReleaseFile, ReleaseQuestion
from clonemem.schemas.versions import FIELD, RELEASE

SOURCE_FORMAT = "clonemem"


def project_type(label: str) -> str:
    """The project's type for a release label (unknown labels are kept as they are, and flagged)."""
    return question_types.aliases().get(label, label)


class _ExportedQuestion(ReleaseQuestion):
    """A release question plus the per-question extras the exporter writes for a question that has a
    source category (``clonemem/exporters/release.py``); other readers ignore them."""

    locomo_category: int | None = None  # a LoCoMo question's category (1-5)
    source_category: str | None = (
        None  # another source's category (LongMemEval's, PersonaMem's type)
    )
    adversarial_answer: str | None = None

    def source(self, source_format: str | None) -> QuestionSource:
        if self.locomo_category is not None:
            return QuestionSource(
                locomo.project_type(self.locomo_category, self.question_type),
                str(self.locomo_category),
                self.adversarial_answer,
            )
        if self.source_category is not None and source_format is not None:
            return QuestionSource(
                _format_type(source_format, self.source_category, self.question_type, self.id),
                self.source_category,
                self.adversarial_answer,
                self.privacy,
            )
        return QuestionSource(
            project_type(self.question_type),
            self.source_category,
            self.adversarial_answer,
            self.privacy,
        )


def _format_type(source_format: str, category: str, label: str, question_id: str) -> str:
    """The type the format's own importer gives a question (an unregistered format: the label as it is)."""
    from clonemem.importers import IMPORTERS

    found = IMPORTERS.get(source_format) if source_format in IMPORTERS else None
    return (
        found.project_type(category, label, question_id)
        if isinstance(found, type)
        else project_type(label)
    )


class _ReleaseFileIn(ReleaseFile):
    questions: list[_ExportedQuestion] | None = None  # type: ignore[assignment]  # narrows the parent's list type for export extras
    qa_items: list[_ExportedQuestion] | None = None  # type: ignore[assignment]  # narrows the parent's list type for export extras
    source_format: str | None = (
        None  # an export of a benchmark imported from another format names it
    )


def parse_release_text(data: bytes | str, file: str) -> ReleaseFile:
    """Parse and check one release file; raise ImportFailed listing every problem found."""
    text = decode_text(data, file) if isinstance(data, bytes) else data.removeprefix("\ufeff")
    try:
        release = _ReleaseFileIn.model_validate_json(text)
    except ValidationError as exc:
        if (version := _version_problem(text, file)) is not None:
            raise ImportFailed(
                [version]
            ) from None  # another major version: its fields mean other things
        problems = []
        for err in exc.errors(include_url=False):
            if err["type"] == "json_invalid":
                problems.append(
                    Problem(file, "$", f"not valid JSON: {err['ctx'].get('error', err['msg'])}")
                )
            else:
                problems.append(Problem(file, json_path(err["loc"]), validation_message(err)))
        raise ImportFailed(problems) from None
    if (why := RELEASE.problem(release.format_version)) is not None:
        raise ImportFailed([Problem(file, f"$.{FIELD}", why)])
    problems = check_references(release, file)
    if problems:
        raise ImportFailed(problems)
    return release


def _version_problem(text: str, file: str) -> Problem | None:
    """A file that failed validation may be of a major version this code cannot read: say that alone."""
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    why = RELEASE.problem(doc.get(FIELD)) if isinstance(doc, dict) else None
    return None if why is None else Problem(file, f"$.{FIELD}", why)


def check_references(release: ReleaseFile, file: str) -> list[Problem]:
    """Checks the schema cannot express: one question list, unique ids, trace ids that exist, choices."""
    problems = _question_list(release, file)
    trace_ids = _unique_trace_ids(release, file, problems)
    key = release.questions_key
    question_ids: dict[str, int] = {}
    for qi, q in enumerate(release.items):
        base = f"$.{key}[{qi}]"
        if q.id in question_ids:
            problems.append(
                Problem(
                    file,
                    f"{base}.id",
                    f"duplicate question id {q.id!r} (first at $.{key}[{question_ids[q.id]}])",
                )
            )
        else:
            question_ids[q.id] = qi
        problems += _trace_references(q, base, trace_ids, file)
        problems += _choices(q, base, file)
        problems += _privacy_items(q, base, file)
    return problems


def _privacy_items(q: ReleaseQuestion, base: str, file: str) -> list[Problem]:
    """A privacy task's items name positions of the question's evidence list, each on one side only."""
    if q.privacy is None:
        return []
    problems: list[Problem] = []
    sides: dict[int, str] = {}
    for role in ("necessary", "sensitive"):
        for i, item in enumerate(getattr(q.privacy, role)):
            where = f"{base}.privacy.{role}[{i}].evidence"
            if item.evidence >= len(q.evidence):
                problems.append(
                    Problem(
                        file,
                        where,
                        f"evidence {item.evidence} is not in the question's evidence "
                        f"list ({len(q.evidence)} items)",
                    )
                )
            elif item.evidence in sides:
                problems.append(
                    Problem(file, where, f"evidence {item.evidence} is also {sides[item.evidence]}")
                )
            sides.setdefault(item.evidence, role)
    return problems


def _question_list(release: ReleaseFile, file: str) -> list[Problem]:
    if release.questions is not None and release.qa_items is not None:
        return [
            Problem(
                file,
                "$",
                "both `questions` and `qa_items` are present; a file has one question list",
            )
        ]
    if release.questions is None and release.qa_items is None:
        return [
            Problem(
                file,
                "$.questions",
                "required field is missing (the question list, "
                f"under `{QUESTION_KEYS[0]}` or `{QUESTION_KEYS[1]}`)",
            )
        ]
    return []


def _unique_trace_ids(release: ReleaseFile, file: str, problems: list[Problem]) -> dict[str, int]:
    """Trace id -> its first index in context; a repeated id is a problem."""
    trace_ids: dict[str, int] = {}
    for i, trace in enumerate(release.context):
        if trace.id in trace_ids:
            problems.append(
                Problem(
                    file,
                    f"$.context[{i}].id",
                    f"duplicate trace id {trace.id!r} (first at $.context[{trace_ids[trace.id]}])",
                )
            )
        else:
            trace_ids[trace.id] = i
    return trace_ids


def _trace_references(
    q: ReleaseQuestion, base: str, trace_ids: dict[str, int], file: str
) -> list[Problem]:
    problems = [
        Problem(file, f"{base}.digital_trace_ids[{ti}]", f"trace {tid!r} is not in context")
        for ti, tid in enumerate(q.digital_trace_ids)
        if tid not in trace_ids
    ]
    for ei, ev in enumerate(q.evidence):
        problems += [
            Problem(
                file,
                f"{base}.evidence[{ei}].digital_trace_ids[{ti}]",
                f"evidence names trace {tid!r}, which is not in context",
            )
            for ti, tid in enumerate(ev.digital_trace_ids)
            if tid not in trace_ids
        ]
    return problems


def _choices(q: ReleaseQuestion, base: str, file: str) -> list[Problem]:
    problems: list[Problem] = []
    seen: set[str] = set()
    for ci, cid in enumerate(c.id for c in q.choices):
        if cid in seen:
            problems.append(
                Problem(file, f"{base}.choices[{ci}].id", f"duplicate choice id {cid!r}")
            )
        seen.add(cid)
    if q.choices and q.correct_choice_id is None:
        problems.append(
            Problem(
                file, f"{base}.correct_choice_id", "choices are given but correct_choice_id is null"
            )
        )
    elif q.correct_choice_id is not None and q.correct_choice_id not in seen:
        where = "is not one of the choice ids" if q.choices else "is set but choices is empty"
        problems.append(
            Problem(file, f"{base}.correct_choice_id", f"{q.correct_choice_id!r} {where}")
        )
    return problems


def _source_format(release: ReleaseFile) -> str | None:
    return release.source_format if isinstance(release, _ReleaseFileIn) else None


def _sources(release: ReleaseFile) -> tuple[QuestionSource, ...]:
    fmt = _source_format(release)
    return tuple(
        q.source(fmt)
        if isinstance(q, _ExportedQuestion)
        else QuestionSource(project_type(q.question_type))
        for q in release.items
    )


def parse_release_persona(path: str | Path, text: str | None = None) -> ParsedPersona:
    rel = parse_release_text(read_text(path) if text is None else text, str(path))
    # a file exported from a benchmark imported from another format keeps that format (its protocols)
    return ParsedPersona(
        str(path),
        rel,
        detect_language(str(path), (t.content for t in rel.context)),
        _source_format(rel) or SOURCE_FORMAT,
        sources=_sources(rel),
    )


class ReleaseImporter(Importer):
    name: ClassVar[str] = "release"
    description: ClassVar[str] = (
        "CloneMem release files (one JSON file per persona; `questions` or `qa_items`)"
    )
    source_format: ClassVar[str] = SOURCE_FORMAT

    def parse_text(self, text: str, file: str) -> list[ParsedPersona]:
        return [parse_release_persona(file, text)]


def parse_release_paths(paths: list[str | Path] | tuple[str | Path, ...]) -> list[ParsedPersona]:
    """Every release file under the paths, parsed; all problems of all files in one error."""
    return ReleaseImporter().parse_paths(paths)


__all__ = [
    "ReleaseImporter",
    "check_references",
    "parse_release_paths",
    "parse_release_persona",
    "parse_release_text",
    "project_type",
]
