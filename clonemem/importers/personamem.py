"""The PersonaMem importer: PersonaMem (Jiang et al., COLM 2025) questions and shared contexts.

An import reads two kinds of file together (``clonemem import personamem QUESTIONS.csv CONTEXTS.jsonl``):
``questions_{32k,128k,1M}.csv`` (columns ``persona_id``, ``question_id``, ``question_type``, ``topic``,
``user_question_or_message``, ``correct_answer`` like ``(c)``, ``all_options`` (a list of four option
strings, as Python or JSON text), ``shared_context_id``, ``end_index_in_shared_context``) and
``shared_contexts_{...}.jsonl`` (one ``{shared_context_id: [{role, content}, ...]}`` object a line). Files
pair by their size suffix (``_32k``); one CSV and one JSONL always pair.

A shared context is one persona (scope): its questions share its history, each cut at its own end
index. Its first message (``system``) holds the persona: it becomes the persona's narrative, never a
memory. Every other message is a trace (``<role>: <text>``, speaker the role, session the shared
context id: PersonaMem has no sessions of its own) whose id is
``<shared_context_id>:<index>`` (its index in the shared context), dated ``index`` minutes after a fixed
start; a question with end index ``e`` (it sees messages ``0 .. e-1``) is asked one second before
message ``e``, so chronological replay and the systems' as-of filter cut exactly at its end index.
Choices are ``a``..``d`` (the option's own ``(a)`` label, dropped from its text), the correct one from
``correct_answer``; the type is kept as label and category and mapped to the closest project type
(:data:`TYPES`); the topic is the question's dimension. Registered as ``personamem``.
"""

from __future__ import annotations

import ast
import csv
import datetime as dt
import io
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from clonemem.importers.base import (
    Importer,
    ImportFailed,
    ParsedPersona,
    Problem,
    QuestionSource,
    decode_text,
    detect_language,
)
from clonemem.schemas.config import CONVERSATION_TURN
from clonemem.schemas.qa import Choice
from clonemem.schemas.release import ReleaseChoice, ReleaseFile, ReleaseQuestion, ReleaseTrace

SOURCE_FORMAT = "personamem"
MEDIUM = CONVERSATION_TURN
START = dt.datetime(2024, 1, 1)
MESSAGE_SPACING = dt.timedelta(minutes=1)
BEFORE_NEXT = dt.timedelta(
    seconds=1
)  # a question is asked this long before the first message it must not see

# PersonaMem's question types -> the closest project type (older releases' names beside the current ones).
TYPES: dict[str, str] = {
    "recall_user_shared_facts": "single_point_factual",
    "recalling_facts_mentioned_by_the_user": "single_point_factual",
    "acknowledge_latest_user_preferences": "single_point_factual",
    "recalling_the_latest_user_preferences": "single_point_factual",
    "track_full_preference_evolution": "trajectory",
    "tracking_the_full_sequence_of_preference_updates": "trajectory",
    "revisit_reasons_behind_preference_updates": "causal",
    "recalling_the_reasons_behind_previous_updates": "causal",
    "provide_preference_aligned_recommendations": "inferential",
    "recommendation_aligned_with_users_latest_preferences": "inferential",
    "suggest_new_ideas": "inferential",
    "identifying_new_things_not_mentioned_by_the_user": "inferential",
    "generalize_to_new_scenarios": "inferential",
    "generalizing_past_reasons_in_memory_to_new_scenarios": "inferential",
}

REQUIRED = (
    "question_id",
    "question_type",
    "correct_answer",
    "all_options",
    "shared_context_id",
    "end_index_in_shared_context",
)
QUESTION_COLUMNS = (
    "user_question_or_message",
    "question",
)  # the current name, and the first release's
_LABEL = re.compile(r"^\s*\(([a-zA-Z])\)\s*")
_SIZE = re.compile(r"_(\w+?)$")


def project_type(label: str) -> str:
    """The project's type for a PersonaMem question type (an unknown one is kept, and flagged)."""
    return TYPES.get(label, label)


def message_time(index: int) -> dt.datetime:
    """When message ``index`` of a shared context is said (synthetic: PersonaMem's messages carry no dates)."""
    return START + index * MESSAGE_SPACING


def question_time(end_index: int) -> dt.datetime:
    """A question that sees messages ``0 .. end_index-1``: after the last of them, before the next."""
    return message_time(end_index) - BEFORE_NEXT


def message_id(context_id: str, index: int) -> str:
    return f"{context_id}:{index}"


@dataclass(frozen=True)
class _Row:
    line: int
    values: dict[str, str]


def _options(text: str) -> list[str] | None:
    """``all_options`` as published: a Python list literal (or JSON) of strings."""
    for parse in (ast.literal_eval, json.loads):
        try:
            value = parse(text)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            return value
    return None


def _choices(options: list[str]) -> list[Choice]:
    """One choice per option: its own ``(a)`` label as id (else its position's letter), the label dropped."""
    out = []
    for i, option in enumerate(options):
        m = _LABEL.match(option)
        out.append(
            Choice(
                id=m.group(1).lower() if m else "abcdefghij"[i],
                text=option[m.end() :] if m else option,
            )
        )
    return out


def read_contexts(data: bytes, file: str) -> dict[str, list[dict[str, str]]]:
    """Every shared context of a JSONL file, checked: a list of ``{role, content}`` messages each."""
    problems: list[Problem] = []
    contexts: dict[str, list[dict[str, str]]] = {}
    for n, line in enumerate(decode_text(data, file).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.append(
                Problem(file, f"line {n}", f"not valid JSON: {exc.msg} at column {exc.colno}")
            )
            continue
        if not isinstance(doc, dict) or len(doc) != 1:
            problems.append(
                Problem(
                    file, f"line {n}: $", "a line is one object {shared_context_id: [messages]}"
                )
            )
            continue
        ((cid, messages),) = doc.items()
        where = f"line {n}: $.{cid}"
        if not isinstance(messages, list):
            problems.append(
                Problem(file, where, f"expected a list of messages (got {type(messages).__name__})")
            )
            continue
        for i, m in enumerate(messages):
            if (
                not isinstance(m, dict)
                or not isinstance(m.get("role"), str)
                or not isinstance(m.get("content"), str)
            ):
                problems.append(
                    Problem(file, f"{where}[{i}]", 'a message is {"role": text, "content": text}')
                )
        if cid in contexts:
            problems.append(Problem(file, where, f"shared context {cid!r} is given twice"))
        contexts[cid] = messages
    if problems:
        raise ImportFailed(problems)
    return contexts


def read_questions(data: bytes, file: str) -> list[_Row]:
    """The rows of a questions CSV with the line each starts on; a missing column is one problem."""
    reader = csv.DictReader(io.StringIO(decode_text(data, file), newline=""))
    columns = reader.fieldnames or []
    missing = [c for c in REQUIRED if c not in columns]
    if not any(c in columns for c in QUESTION_COLUMNS):
        missing.append(QUESTION_COLUMNS[0])
    if missing:
        raise ImportFailed(
            [
                Problem(
                    file,
                    "line 1",
                    f"missing column{'s' if len(missing) > 1 else ''} "
                    f"{', '.join(missing)} (a PersonaMem questions_*.csv)",
                )
            ]
        )
    rows: list[_Row] = []
    while True:
        start = reader.line_num + 1
        try:
            values = next(reader, None)
        except csv.Error as exc:
            raise ImportFailed([Problem(file, f"line {start}", f"not valid CSV: {exc}")]) from None
        if values is None:
            return rows
        if None in values:
            raise ImportFailed(
                [Problem(file, f"line {start}", f"more fields than the {len(columns)} columns")]
            )
        rows.append(_Row(start, {k: (v or "") for k, v in values.items()}))


class _Pair:
    """One questions file and its contexts, turned into a persona per shared context."""

    def __init__(
        self,
        questions_file: str,
        rows: list[_Row],
        contexts_file: str,
        contexts: dict[str, list[dict[str, str]]],
    ):
        self.questions_file, self.rows = questions_file, rows
        self.contexts_file, self.contexts = contexts_file, contexts
        self.problems: list[Problem] = []

    def problem(self, row: _Row, column: str, message: str) -> None:
        self.problems.append(
            Problem(self.questions_file, f"line {row.line}, column {column}", message)
        )

    def question(self, row: _Row) -> tuple[str, ReleaseQuestion, QuestionSource] | None:
        v = row.values
        cid = v["shared_context_id"].strip()
        context = self.contexts.get(cid)
        if context is None:
            self.problem(
                row, "shared_context_id", f"shared context {cid!r} is not in {self.contexts_file}"
            )
            return None
        raw_end = v["end_index_in_shared_context"].strip()
        if not raw_end.isdigit() or not 1 <= int(raw_end) <= len(context):
            self.problem(
                row,
                "end_index_in_shared_context",
                f"expected a message index 1..{len(context)} (got {raw_end!r})",
            )
            return None
        options = _options(v["all_options"])
        if options is None:
            self.problem(
                row, "all_options", "expected a list of option strings, e.g. ['(a) ...', '(b) ...']"
            )
            return None
        choices = _choices(options)
        m = _LABEL.match(v["correct_answer"])
        correct = m.group(1).lower() if m and not v["correct_answer"][m.end() :].strip() else None
        if correct is None or correct not in {c.id for c in choices}:
            self.problem(
                row,
                "correct_answer",
                f"expected one of the options' labels, e.g. (a) (got {v['correct_answer']!r})",
            )
            return None
        qtype = v["question_type"].strip()
        text = next(v[c] for c in QUESTION_COLUMNS if c in v)
        end = int(raw_end)
        question = ReleaseQuestion(
            id=v["question_id"].strip(),
            question=text,
            question_type=qtype,
            question_time=question_time(end),
            answer=next(c.text for c in choices if c.id == correct),
            dimension=v.get("topic", "").strip()
            or "unspecified",  # PersonaMem's topic (e.g. therapy)
            choices=[ReleaseChoice(id=c.id, text=c.text) for c in choices],
            correct_choice_id=correct,
        )
        return cid, question, QuestionSource(project_type(qtype), qtype)

    def personas(self) -> list[ParsedPersona]:
        by_context: dict[str, list[tuple[ReleaseQuestion, QuestionSource]]] = {}
        persona_of: dict[str, str] = {}
        seen: dict[str, int] = {}
        for row in self.rows:
            qid = row.values["question_id"].strip()
            if not qid:
                self.problem(row, "question_id", "must not be empty")
                continue
            if qid in seen:
                self.problem(row, "question_id", f"question {qid!r} is also on line {seen[qid]}")
                continue
            seen[qid] = row.line
            got = self.question(row)
            if got is not None:
                by_context.setdefault(got[0], []).append(got[1:])
                persona_of.setdefault(got[0], row.values.get("persona_id", "").strip())
        if self.problems:
            raise ImportFailed(self.problems)
        return [self.persona(cid, items, persona_of[cid]) for cid, items in by_context.items()]

    def persona(
        self, cid: str, items: list[tuple[ReleaseQuestion, QuestionSource]], person: str
    ) -> ParsedPersona:
        messages = self.contexts[cid]
        narrative = None
        traces = []
        for i, m in enumerate(messages):
            if (
                i == 0 and m["role"] == "system"
            ):  # the persona: who the user is, not something they said
                narrative = m["content"]
                continue
            traces.append(
                ReleaseTrace(
                    id=message_id(cid, i),
                    medium=MEDIUM,
                    event_date=message_time(i),
                    content=f"{m['role']}: {m['content']}",
                    speaker=m["role"],
                    session_key=cid,
                )
            )
        release = ReleaseFile(
            person_name=f"persona {person}" if person else cid,
            person_id=cid,
            context=traces,
            questions=[q for q, _ in items],
        )
        language = detect_language(
            None, [q.question for q, _ in items[:5]] + [t.content[:300] for t in traces[:8]]
        )
        return ParsedPersona(
            self.questions_file,
            release,
            language,
            SOURCE_FORMAT,
            sources=tuple(s for _, s in items),
            narrative=narrative,
        )


def parse_pair(
    questions: bytes, questions_file: str, contexts: bytes, contexts_file: str
) -> list[ParsedPersona]:
    """Every persona of one questions CSV and its shared contexts JSONL."""
    problems: list[Problem] = []
    rows: list[_Row] = []
    found: dict[str, list[dict[str, str]]] = {}
    for read in (
        lambda: rows.extend(read_questions(questions, questions_file)),
        lambda: found.update(read_contexts(contexts, contexts_file)),
    ):
        try:
            read()
        except ImportFailed as exc:
            problems.extend(exc.problems)
    if problems:
        raise ImportFailed(problems)
    return _Pair(questions_file, rows, contexts_file, found).personas()


def _size(path: Path) -> str:
    m = _SIZE.search(path.stem)
    return m.group(1).lower() if m else ""


def pair_files(files: Sequence[Path]) -> list[tuple[Path, Path]]:
    """(questions CSV, contexts JSONL) pairs: one of each, or matched by their size suffix (``_32k``)."""
    csvs = [f for f in files if f.suffix.lower() == ".csv"]
    jsonls = [f for f in files if f.suffix.lower() == ".jsonl"]
    if len(csvs) == 1 and len(jsonls) == 1:
        return [(csvs[0], jsonls[0])]
    by_size = {_size(f): f for f in jsonls}
    pairs, problems = [], []
    for q in csvs:
        c = by_size.pop(_size(q), None)
        if c is None:
            problems.append(
                Problem(
                    str(q),
                    "",
                    "no shared contexts file (.jsonl) for these questions: give "
                    "QUESTIONS.csv CONTEXTS.jsonl (e.g. shared_contexts_32k.jsonl)",
                )
            )
        else:
            pairs.append((q, c))
    problems += [
        Problem(
            str(c),
            "",
            "no questions file (.csv) for these shared contexts: give "
            "QUESTIONS.csv CONTEXTS.jsonl (e.g. questions_32k.csv)",
        )
        for c in by_size.values()
    ]
    if problems:
        raise ImportFailed(problems)
    return pairs


class PersonaMemImporter(Importer):
    name: ClassVar[str] = "personamem"
    description: ClassVar[str] = (
        "PersonaMem questions (questions_*.csv) with their shared contexts (*.jsonl)"
    )
    source_format: ClassVar[str] = SOURCE_FORMAT
    suffixes: ClassVar[tuple[str, ...]] = (".csv", ".jsonl")
    protocols: ClassVar[tuple[str, ...]] = ("personamem",)

    @classmethod
    def project_type(cls, category: str | None, label: str, question_id: str = "") -> str:
        return project_type(category or label)

    def group(self, files: Sequence[Path]) -> list[tuple[Path, ...]]:
        return list(pair_files(files))

    def parse_group(self, data: Sequence[bytes], files: Sequence[str]) -> list[ParsedPersona]:
        if len(files) != 2:
            raise ImportFailed(
                [
                    Problem(
                        files[0] if files else "personamem",
                        "",
                        "give a questions CSV and its shared contexts JSONL",
                    )
                ]
            )
        return parse_pair(data[0], files[0], data[1], files[1])

    def parse_text(self, text: str, file: str) -> list[ParsedPersona]:
        raise ImportFailed(
            [Problem(file, "", "a PersonaMem import reads two files: QUESTIONS.csv CONTEXTS.jsonl")]
        )

    def parse_bytes(self, data: bytes, file: str) -> list[ParsedPersona]:
        return self.parse_text("", file)
