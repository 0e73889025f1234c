"""The LongMemEval importer: LongMemEval (Wu et al., ICLR 2025) instances as a benchmark.

A file is a JSON list of instances (``longmemeval_s``, ``longmemeval_m`` and ``longmemeval_oracle``
share the layout): ``question_id`` (suffix ``_abs``: an abstention question), ``question_type``,
``question``, ``answer``, ``question_date``, ``haystack_session_ids``, ``haystack_dates``,
``haystack_sessions`` (each a list of turns ``{role, content, has_answer?}``) and ``answer_session_ids``.

Each instance has its own history, so one instance is one persona (the scope memory systems are built
or replayed for), its person key the question id. Each turn is one trace (medium ``conversation_turn``,
content ``<role>: <text>``) whose id is LongMemEval's own turn id ``<session id>_<n>`` (n 1-based over
all turns of the session), with the session id, the role as speaker and the session date kept apart.
A session's turns are dated from its ``haystack_dates`` entry one millisecond apart (sessions of one
date a second apart, in haystack order), so replay keeps the order. The question is asked at
``question_date``; its evidence is the turns marked ``has_answer``, its evidence sessions the
``answer_session_ids``; ``question_type`` is kept as the source label and category and mapped to the
closest project type (:data:`TYPES`; an ``_abs`` question is ``unanswerable``).

The files are big (``_s`` ~270 MB, ``_m`` several GB), and the same sessions recur across instances:
the list is streamed item by item (ijson), never held whole, and landed in batches with every turn
text stored once (:func:`clonemem.importers.base.load_stream`). Registered as ``longmemeval``.
"""

from __future__ import annotations

import codecs
import datetime as dt
import json
import re
from collections.abc import Iterator
from typing import Any, BinaryIO, ClassVar, Literal

import ijson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from clonemem.importers.base import (
    ImportNote,
    ParsedPersona,
    Problem,
    QuestionSource,
    StreamingImporter,
    detect_language,
    json_path,
    validation_message,
)
from clonemem.schemas.config import CONVERSATION_TURN
from clonemem.schemas.release import ReleaseEvidence, ReleaseFile, ReleaseQuestion, ReleaseTrace

SOURCE_FORMAT = "longmemeval"
MEDIUM = CONVERSATION_TURN
DIMENSION = "unspecified"  # LongMemEval's types say nothing about experience/emotion/opinion
TURN_SPACING = dt.timedelta(milliseconds=1)  # turns of one session, in order, inside its minute
SAME_DATE_SPACING = dt.timedelta(seconds=1)  # sessions sharing one date, in haystack order
ABSTENTION_SUFFIX = "_abs"

# LongMemEval's question types -> the closest project type. Single-session recall of what the user or
# the assistant said: single_point_factual; a preference to be inferred and applied: inferential;
# temporal reasoning relates points in time: comparison; a knowledge update follows a fact as it
# changes: trajectory; multi-session aggregation gathers facts spread over sessions: pattern (as
# LoCoMo's multi-hop). An abstention question (`_abs`) is unanswerable whatever its type.
TYPES: dict[str, str] = {
    "single-session-user": "single_point_factual",
    "single-session-assistant": "single_point_factual",
    "single-session-preference": "inferential",
    "temporal-reasoning": "comparison",
    "knowledge-update": "trajectory",
    "multi-session": "pattern",
}

_DATE = re.compile(r"^\s*(\d{4})/(\d{1,2})/(\d{1,2})\s*(?:\([A-Za-z]+\))?\s*(\d{1,2}):(\d{2})\s*$")
_OTHER_BOMS = (
    (codecs.BOM_UTF32_LE, "UTF-32"),
    (codecs.BOM_UTF32_BE, "UTF-32"),
    (codecs.BOM_UTF16_LE, "UTF-16"),
    (codecs.BOM_UTF16_BE, "UTF-16"),
)


def is_abstention(question_id: str) -> bool:
    """LongMemEval marks an abstention question by its id's suffix."""
    return question_id.endswith(ABSTENTION_SUFFIX)


def project_type(label: str, question_id: str = "") -> str:
    """The project's type for a LongMemEval question (an unknown label is kept, and flagged)."""
    return "unanswerable" if is_abstention(question_id) else TYPES.get(label, label)


def parse_date(text: str) -> dt.datetime | None:
    """'2023/05/20 (Sat) 02:21' (LongMemEval's form), or ISO 8601; None when neither."""
    m = _DATE.match(text)
    if m:
        try:
            year, month, day, hour, minute = (int(g) for g in m.groups())
            return dt.datetime(year, month, day, hour, minute)
        except ValueError:
            return None
    try:
        return dt.datetime.fromisoformat(text.strip())
    except ValueError:
        return None


def turn_id(session_id: str, n: int) -> str:
    """LongMemEval's own id of the n-th turn (1-based, user and assistant turns counted) of a session."""
    return f"{session_id}_{n}"


class _Lme(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True, frozen=True)


class LmeTurn(_Lme):
    role: Literal["user", "assistant"]
    content: str
    has_answer: bool | None = None


class LmeInstance(_Lme):
    question_id: str = Field(min_length=1)
    question_type: str
    question: str
    answer: str | int | float
    question_date: str
    haystack_session_ids: list[str]
    haystack_dates: list[str]
    haystack_sessions: list[list[LmeTurn]]
    answer_session_ids: list[str] = Field(default_factory=list)


class _Instance:
    """One instance converted to the release model, with its notes and problems."""

    def __init__(self, file: str, index: int, item: LmeInstance):
        self.file, self.at, self.item = file, f"$[{index}]", item
        self.problems: list[Problem] = []
        self.notes: list[ImportNote] = []

    def problem(self, path: str, message: str) -> None:
        self.problems.append(Problem(self.file, f"{self.at}{path}", message))

    def sessions(self) -> list[tuple[str, dt.datetime, list[LmeTurn], int]]:
        """(session key, date, turns, position) per haystack session; a repeated id gets a suffix (noted)."""
        item = self.item
        counts = {
            len(item.haystack_session_ids),
            len(item.haystack_dates),
            len(item.haystack_sessions),
        }
        if len(counts) > 1:
            self.problem(
                "",
                f"haystack_session_ids ({len(item.haystack_session_ids)}), haystack_dates "
                f"({len(item.haystack_dates)}) and haystack_sessions ({len(item.haystack_sessions)}) "
                "must have one entry per session",
            )
            return []
        out, seen = [], dict[str, int]()
        for i, (sid, raw_date) in enumerate(
            zip(item.haystack_session_ids, item.haystack_dates, strict=True)
        ):
            date = parse_date(raw_date)
            if date is None:
                self.problem(
                    f".haystack_dates[{i}]",
                    f"not a date: {json.dumps(raw_date)[:60]} "
                    "(expected e.g. '2023/05/20 (Sat) 02:21')",
                )
                continue
            key = sid
            if sid in seen:
                seen[sid] += 1
                key = f"{sid}#{seen[sid]}"
                self.notes.append(
                    ImportNote(
                        self.file,
                        f"{self.at}.haystack_session_ids[{i}]",
                        "duplicate_session",
                        sid,
                        key,
                    )
                )
            seen.setdefault(sid, 1)
            out.append((key, date, item.haystack_sessions[i], i))
        return out

    def persona(self) -> ParsedPersona | None:
        item = self.item
        asked = parse_date(item.question_date)
        if asked is None:
            self.problem(
                ".question_date",
                f"not a date: {json.dumps(item.question_date)[:60]} "
                "(expected e.g. '2023/05/20 (Sat) 02:21')",
            )
        sessions = self.sessions()
        if self.problems or asked is None:
            return None
        traces: list[ReleaseTrace] = []
        evidence: list[ReleaseTrace] = []
        same_date: dict[dt.datetime, int] = {}
        latest_visible = asked
        for key, date, turns, _ in sessions:
            start = date + same_date.get(date, 0) * SAME_DATE_SPACING
            same_date[date] = same_date.get(date, 0) + 1
            for n, turn in enumerate(turns, start=1):
                trace = ReleaseTrace(
                    id=turn_id(key, n),
                    medium=MEDIUM,
                    event_date=start + (n - 1) * TURN_SPACING,
                    content=f"{turn.role}: {turn.content}",
                    session_key=key,
                    speaker=turn.role,
                    session_date=date,
                )
                traces.append(trace)
                if turn.has_answer:
                    evidence.append(trace)
                if date <= asked:  # a session of the question's own minute stays visible to it
                    latest_visible = max(latest_visible, trace.event_date)
        held = {key for key, *_ in sessions}
        for i, sid in enumerate(item.answer_session_ids):
            if sid not in held:
                self.notes.append(
                    ImportNote(self.file, f"{self.at}.answer_session_ids[{i}]", "unresolved", sid)
                )
        answer = item.answer if isinstance(item.answer, str) else json.dumps(item.answer)
        question = ReleaseQuestion(
            id=item.question_id,
            question=item.question,
            question_type=item.question_type,
            question_time=latest_visible,
            answer=answer,
            dimension=DIMENSION,
            digital_trace_ids=[t.id for t in evidence],
            evidence=[
                ReleaseEvidence(statement=t.content, digital_trace_ids=[t.id]) for t in evidence
            ],
            choices=[],
            correct_choice_id=None,
            evidence_sessions=list(item.answer_session_ids),
        )
        release = ReleaseFile(
            person_name=item.question_id,
            person_id=item.question_id,
            context=traces,
            questions=[question],
        )
        # a sample is enough (and the whole haystack would cost more than the rest of the import)
        language = detect_language(None, [item.question, *(t.content[:300] for t in traces[:8])])
        return ParsedPersona(
            self.file,
            release,
            language,
            SOURCE_FORMAT,
            tuple(self.notes),
            (
                QuestionSource(
                    project_type(item.question_type, item.question_id), item.question_type
                ),
            ),
        )


def _opening(stream: BinaryIO, file: str) -> Problem | None:
    """Skip a UTF-8 byte-order mark; anything but a JSON list (or another encoding) is one problem."""
    head = stream.read(4096)
    for bom, name in _OTHER_BOMS:
        if head.startswith(bom):
            return Problem(file, "$", f"file is {name} encoded; save it as UTF-8")
    skip = len(codecs.BOM_UTF8) if head.startswith(codecs.BOM_UTF8) else 0
    stream.seek(skip)
    first = head[skip:].lstrip()[:1]
    if first != b"[":
        what = "an empty file" if not first else "not a JSON list"
        return Problem(file, "$", f"{what}: a LongMemEval file is a JSON list of instances")
    return None


def iter_instances(stream: BinaryIO, file: str, problems: list[Problem]) -> Iterator[ParsedPersona]:
    """The personas of one LongMemEval file, read item by item; problems are added, bad items skipped."""
    opening = _opening(stream, file)
    if opening is not None:
        problems.append(opening)
        return
    index = 0
    items = ijson.items(stream, "item", use_float=True)
    while True:
        try:
            raw: Any = next(items, None)
        except ijson.JSONError as exc:
            problems.append(
                Problem(file, f"$[{index}]", f"not valid JSON: {str(exc).splitlines()[0][:120]}")
            )
            return
        except UnicodeDecodeError as exc:
            problems.append(
                Problem(file, f"$[{index}]", f"not UTF-8 text ({exc.reason}); save it as UTF-8")
            )
            return
        if raw is None:
            return
        parsed = _instance(raw, file, index, problems)
        if parsed is not None:
            yield parsed
        index += 1


def _instance(raw: Any, file: str, index: int, problems: list[Problem]) -> ParsedPersona | None:
    if not isinstance(raw, dict):
        problems.append(
            Problem(file, f"$[{index}]", f"an instance is an object (got {type(raw).__name__})")
        )
        return None
    try:
        item = LmeInstance.model_validate(raw)
    except ValidationError as exc:
        problems.extend(
            Problem(
                file,
                json_path(err["loc"]).replace("$", f"$[{index}]", 1),
                validation_message(dict(err)),
            )
            for err in exc.errors(include_url=False)
        )
        return None
    instance = _Instance(file, index, item)
    persona = instance.persona()
    problems.extend(instance.problems)
    return persona


class LongMemEvalImporter(StreamingImporter):
    name: ClassVar[str] = "longmemeval"
    description: ClassVar[str] = (
        "LongMemEval instances (longmemeval_s / _m / _oracle: a JSON list; one scope each)"
    )
    source_format: ClassVar[str] = SOURCE_FORMAT
    protocols: ClassVar[tuple[str, ...]] = ("longmemeval",)

    @classmethod
    def project_type(cls, category: str | None, label: str, question_id: str = "") -> str:
        return project_type(category or label, question_id)

    def iter_stream(
        self, stream: BinaryIO, file: str, problems: list[Problem]
    ) -> Iterator[ParsedPersona]:
        return iter_instances(stream, file, problems)
