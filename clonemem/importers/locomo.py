"""The LoCoMo importer: LoCoMo (Maharana et al., ACL 2024) conversations as a benchmark.

Both published layouts: one JSON object per conversation (``speaker_a``, ``speaker_b``,
``session_N_date_time``, ``session_N`` turn lists, annotation keys, ``qa``), and the combined
``locomo10.json`` (a list of samples with ``sample_id``, ``conversation`` and ``qa``).

A conversation becomes one persona; each dialog turn one trace (medium ``conversation_turn``) dated by
its session, one minute apart so the order is kept, its id ``<sample>:<dia_id>``; an image caption
stays with its turn (and is kept apart too: ``traces.attachments``, with the image urls); each trace
keeps its session (``session_N``), speaker and session date. Each question becomes a free-text item asked a day after the last turn, one
evidence item per referenced turn. Evidence references that are not one clean turn id are split,
normalised or, when they name no turn, reported with their JSON path; all of it is counted in the
import summary and stored in ``import_notes``.

Registered as ``locomo``. Its own fields: the category (stored as text '1'..'5' in
``questions.source_category``, its label in ``source_question_type``) and the adversarial trap answer (``questions.adversarial_answer``);
its type mapping is :data:`CATEGORIES`.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError

from clonemem.importers.base import (
    Importer,
    ImportFailed,
    ImportNote,
    ParsedPersona,
    Problem,
    QuestionSource,
    detect_language,
    json_path,
    parse_each,
)
from clonemem.schemas import question_types
from clonemem.schemas.config import CONVERSATION_TURN
from clonemem.schemas.release import (
    ReleaseAttachment,
    ReleaseEvidence,
    ReleaseFile,
    ReleaseQuestion,
    ReleaseTrace,
)

SOURCE_FORMAT = "locomo"

# LoCoMo's numbered categories: (label kept in questions.source_question_type, project type).
# Multi-hop items gather facts scattered over sessions (closest: pattern); temporal items ask when one
# thing happened (single_point_factual); open-domain items infer from what was said (inferential);
# adversarial items ask about something never said (unanswerable).
CATEGORIES: dict[int, tuple[str, str]] = {
    1: ("multi_hop", "pattern"),
    2: ("temporal", "single_point_factual"),
    3: ("open_domain", "inferential"),
    4: ("single_hop", "single_point_factual"),
    5: ("adversarial", "unanswerable"),
}


def project_type(category: int | str | None, label: str) -> str:
    """The project's type for a LoCoMo category (another category keeps its label, and is flagged)."""
    number = int(category) if isinstance(category, str) and category.isdigit() else category
    if number in CATEGORIES:
        return CATEGORIES[number][1]
    return question_types.aliases().get(label, label)


MEDIUM = CONVERSATION_TURN
NOT_MENTIONED = "Not mentioned in the conversation"
DIMENSION = "unspecified"  # LoCoMo's categories say nothing about experience/emotion/opinion
TURN_SPACING = dt.timedelta(minutes=1)
QUESTION_DELAY = dt.timedelta(days=1)  # questions are asked after the last session

_SESSION = re.compile(r"^session_(\d+)$")
_TURN_ID = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)", re.IGNORECASE)
_DATE = re.compile(
    r"^\s*(\d{1,2})[:.](\d{2})\s*([ap])\.?\s*m\.?\s+on\s+(\d{1,2})\s+([A-Za-z]+)\.?,?\s+(\d{4})\s*$",
    re.IGNORECASE,
)
_MONTHS = {
    m: i + 1
    for i, m in enumerate(
        (
            "january",
            "february",
            "march",
            "april",
            "may",
            "june",
            "july",
            "august",
            "september",
            "october",
            "november",
            "december",
        )
    )
}
_MONTHS.update({m[:3]: i for m, i in list(_MONTHS.items())})
_MONTHS["sept"] = 9


class _Locomo(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True, frozen=True)


class LocomoTurn(_Locomo):
    speaker: str
    dia_id: str
    text: str
    blip_caption: str | None = None
    img_url: list[str] | str | None = None

    def attachments(self) -> list[ReleaseAttachment] | None:
        """The images shared with the turn: one per url, each with the turn's caption."""
        urls: list[str | None] = (
            [self.img_url] if isinstance(self.img_url, str) else list(self.img_url or [])
        )
        if not urls and not self.blip_caption:
            return None
        return [ReleaseAttachment(caption=self.blip_caption, url=u) for u in urls or [None]]


class LocomoQA(_Locomo):
    question: str
    category: int
    answer: str | int | float | None = None
    adversarial_answer: str | int | float | None = None
    evidence: list[Any] = []


def parse_session_date(text: str) -> dt.datetime | None:
    """'1:56 pm on 8 May, 2023' (LoCoMo's form), or ISO 8601; None when neither."""
    m = _DATE.match(text)
    if m:
        hour, minute, half, day, month, year = m.groups()
        month_no = _MONTHS.get(month.lower())
        if month_no is None or not 1 <= int(hour) <= 12:
            return None
        hour24 = int(hour) % 12 + (12 if half.lower() == "p" else 0)
        try:
            return dt.datetime(int(year), month_no, int(day), hour24, int(minute))
        except ValueError:
            return None
    try:
        return dt.datetime.fromisoformat(text.strip())
    except ValueError:
        return None


def canonical_turn_id(session: int | str, turn: int | str) -> str:
    return f"D{int(session)}:{int(turn)}"


def _answer_text(value: str | int | float | None) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else json.dumps(value)


class _Sample:
    """One conversation and its questions, converted to the release model with notes and problems."""

    def __init__(
        self, file: str, sample_id: str, conv: dict, conv_path: str, qa: Any, qa_path: str
    ):
        self.file, self.sample_id = file, sample_id
        self.conv, self.conv_path = conv, conv_path
        self.qa, self.qa_path = qa, qa_path
        self.problems: list[Problem] = []
        self.notes: list[ImportNote] = []
        self.traces: list[ReleaseTrace] = []
        self.by_turn: dict[str, ReleaseTrace] = {}  # canonical dia_id -> first trace with it
        self.repeats: dict[str, int] = {}

    def problem(self, path: str, message: str) -> None:
        self.problems.append(Problem(self.file, path, message))

    def note(self, path: str, kind: str, raw: str | None, resolved: str | None = None) -> None:
        self.notes.append(ImportNote(self.file, path, kind, raw, resolved))

    # -- turns -------------------------------------------------------------------------------

    def read_turns(self) -> None:
        sessions = sorted((int(m.group(1)), key) for key in self.conv if (m := _SESSION.match(key)))
        for number, key in sessions:
            turns = self.conv[key]
            path = f"{self.conv_path}.{key}"
            if not isinstance(turns, list):
                self.problem(path, f"a session is a list of turns (got {type(turns).__name__})")
                continue
            if not turns:
                continue
            date_key = f"{key}_date_time"
            raw_date = self.conv.get(date_key)
            start = parse_session_date(raw_date) if isinstance(raw_date, str) else None
            if start is None:
                got = "missing" if raw_date is None else f"not a date: {json.dumps(raw_date)[:60]}"
                self.problem(
                    f"{self.conv_path}.{date_key}",
                    f"session date {got} (expected e.g. '1:56 pm on 8 May, 2023')",
                )
                continue
            for i, raw_turn in enumerate(turns):
                self.read_turn(raw_turn, f"{path}[{i}]", start + i * TURN_SPACING, key, start)

    def read_turn(
        self, raw: Any, path: str, when: dt.datetime, session: str, session_date: dt.datetime
    ) -> None:
        try:
            turn = LocomoTurn.model_validate(raw)
        except ValidationError as exc:
            for err in exc.errors(include_url=False):
                msg = "required field is missing" if err["type"] == "missing" else err["msg"]
                self.problem(json_path(err["loc"]).replace("$", path, 1), msg)
            return
        m = _TURN_ID.fullmatch(turn.dia_id.strip())
        canonical = canonical_turn_id(*m.groups()) if m else turn.dia_id.strip()
        trace_id = f"{self.sample_id}:{canonical}"
        if canonical in self.by_turn:
            self.repeats[canonical] = self.repeats.get(canonical, 1) + 1
            trace_id = f"{trace_id}#{self.repeats[canonical]}"
            self.note(f"{path}.dia_id", "duplicate_turn", turn.dia_id, trace_id)
        content = f"{turn.speaker}: {turn.text}"
        if turn.blip_caption:
            content += f" [shares a photo: {turn.blip_caption}]"
        trace = ReleaseTrace(
            id=trace_id,
            medium=MEDIUM,
            event_date=when,
            content=content,
            session_key=session,
            speaker=turn.speaker,
            session_date=session_date,
            attachments=turn.attachments(),
        )
        self.traces.append(trace)
        self.by_turn.setdefault(canonical, trace)

    # -- questions ---------------------------------------------------------------------------

    def resolve_evidence(self, refs: list[Any], path: str) -> list[ReleaseTrace]:
        found: list[ReleaseTrace] = []
        for ei, raw in enumerate(refs):
            at = f"{path}[{ei}]"
            text = raw if isinstance(raw, str) else json.dumps(raw)
            ids = (
                [canonical_turn_id(s, t) for s, t in _TURN_ID.findall(text)]
                if isinstance(raw, str)
                else []
            )
            if not ids:
                self.note(at, "unresolved", text)
                continue
            if len(ids) > 1:
                self.note(at, "split", text, ", ".join(ids))
            elif ids[0] != text:
                self.note(at, "normalised", text, ids[0])
            for turn_id in ids:
                trace = self.by_turn.get(turn_id)
                if trace is None:
                    self.note(at, "unresolved", turn_id if len(ids) > 1 else text)
                elif trace not in found:
                    found.append(trace)
        return found

    def read_questions(self, asked_at: dt.datetime) -> list[tuple[ReleaseQuestion, QuestionSource]]:
        if not isinstance(self.qa, list):
            self.problem(
                self.qa_path,
                "required list of questions is missing"
                if self.qa is None
                else f"expected a list of questions (got {type(self.qa).__name__})",
            )
            return []
        out = []
        for qi, raw in enumerate(self.qa):
            path = f"{self.qa_path}[{qi}]"
            try:
                item = LocomoQA.model_validate(raw)
            except ValidationError as exc:
                for err in exc.errors(include_url=False):
                    msg = "required field is missing" if err["type"] == "missing" else err["msg"]
                    self.problem(json_path(err["loc"]).replace("$", path, 1), msg)
                continue
            turns = self.resolve_evidence(item.evidence, f"{path}.evidence")
            label = CATEGORIES.get(item.category, (f"category_{item.category}", ""))[0]
            trap = None
            if (
                item.category == 5
            ):  # the given answer is a trap: the truth is that it was never said
                answer = NOT_MENTIONED
                trap = _answer_text(
                    item.adversarial_answer if item.adversarial_answer is not None else item.answer
                )
            else:
                given = _answer_text(item.answer)
                if given is None:
                    self.note(f"{path}.answer", "missing_answer", None)
                answer = given or ""
            out.append(
                (
                    ReleaseQuestion(
                        id=f"{self.sample_id}:q{qi}",
                        question=item.question,
                        question_type=label,
                        question_time=asked_at,
                        answer=answer,
                        dimension=DIMENSION,
                        digital_trace_ids=[t.id for t in turns],
                        evidence=[
                            ReleaseEvidence(statement=t.content, digital_trace_ids=[t.id])
                            for t in turns
                        ],
                        choices=[],
                        correct_choice_id=None,
                    ),
                    QuestionSource(project_type(item.category, label), str(item.category), trap),
                )
            )
        return out

    def persona(self) -> ParsedPersona:
        self.read_turns()
        if not self.traces and not self.problems:
            self.problem(self.conv_path, "conversation has no turns (no non-empty session_N lists)")
        if self.problems:
            raise ImportFailed(self.problems)
        asked_at = max(t.event_date for t in self.traces) + QUESTION_DELAY
        questions = self.read_questions(asked_at)
        if self.problems:
            raise ImportFailed(self.problems)
        given = [self.conv.get(k) for k in ("speaker_a", "speaker_b")]
        speakers = [s for s in given if isinstance(s, str) and s]
        if len(speakers) < len(given):
            speakers = list(dict.fromkeys(t.content.split(":", 1)[0] for t in self.traces))[:2]
        release = ReleaseFile(
            person_name=" & ".join(speakers),
            person_id=self.sample_id,
            context=self.traces,
            questions=[q for q, _ in questions],
        )
        return ParsedPersona(
            self.file,
            release,
            detect_language(None, (t.content for t in self.traces)),
            SOURCE_FORMAT,
            tuple(self.notes),
            tuple(s for _, s in questions),
        )


def parse_locomo_text(text: str, file: str) -> list[ParsedPersona]:
    """Every conversation in one LoCoMo file (either layout)."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ImportFailed(
            [
                Problem(
                    file, "$", f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
                )
            ]
        ) from None
    samples: list[_Sample] = []
    if isinstance(doc, list):
        for i, sample in enumerate(doc):
            if not isinstance(sample, dict) or not isinstance(sample.get("conversation"), dict):
                raise ImportFailed(
                    [
                        Problem(
                            file,
                            f"$[{i}]",
                            "a locomo10.json sample is an object with a `conversation` object",
                        )
                    ]
                )
            samples.append(
                _Sample(
                    file,
                    _sample_id(sample.get("sample_id"), f"{Path(file).stem}-{i}"),
                    sample["conversation"],
                    f"$[{i}].conversation",
                    sample.get("qa"),
                    f"$[{i}].qa",
                )
            )
    elif isinstance(doc, dict) and isinstance(doc.get("conversation"), dict):
        samples.append(
            _Sample(
                file,
                _sample_id(doc.get("sample_id"), Path(file).stem),
                doc["conversation"],
                "$.conversation",
                doc.get("qa"),
                "$.qa",
            )
        )
    elif isinstance(doc, dict) and ("speaker_a" in doc or any(_SESSION.match(k) for k in doc)):
        samples.append(
            _Sample(
                file,
                _sample_id(doc.get("sample_id"), Path(file).stem),
                doc,
                "$",
                doc.get("qa"),
                "$.qa",
            )
        )
    else:
        raise ImportFailed(
            [
                Problem(
                    file,
                    "$",
                    "not a LoCoMo file: expected a list of samples (locomo10.json) or "
                    "one conversation (speaker_a, session_N, qa)",
                )
            ]
        )
    return parse_each(samples, lambda sample: [sample.persona()])


def _sample_id(value: Any, fallback: str) -> str:
    if isinstance(value, str | int) and str(value).strip():
        return str(value).strip()
    return fallback


class LocomoImporter(Importer):
    name: ClassVar[str] = "locomo"
    description: ClassVar[str] = (
        "LoCoMo conversations (one conversation per file, or locomo10.json)"
    )
    source_format: ClassVar[str] = SOURCE_FORMAT
    protocols: ClassVar[tuple[str, ...]] = ("locomo", "mem0")

    @classmethod
    def project_type(cls, category: str | None, label: str, question_id: str = "") -> str:
        return project_type(category, label)

    def parse_text(self, text: str, file: str) -> list[ParsedPersona]:
        return parse_locomo_text(text, file)


def parse_locomo_paths(paths: Sequence[str | Path]) -> list[ParsedPersona]:
    """Every conversation under the paths (files or folders of ``*.json``); all problems in one error."""
    return LocomoImporter().parse_paths(paths)
