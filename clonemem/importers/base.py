"""What every importer shares: problems with file and JSON path, reading files and folders, the parsed
persona every format produces, and the landing of a whole import in one transaction.

An importer (one module per source format, registered in :data:`clonemem.importers.IMPORTERS`) only
turns one file's text into :class:`ParsedPersona` objects; everything else is here. Import reads and
validates every file completely before the warehouse is even opened; a file that fails loads nothing,
the whole import is one transaction, and a failed import into a warehouse that did not exist leaves
no file behind.
"""

from __future__ import annotations

import codecs
import datetime as dt
import io
import json
import re
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, ClassVar, TypeVar

from clonemem.errors import UserError
from clonemem.ids import benchmark_id, content_id, persona_id, stable_hash
from clonemem.schemas import question_types
from clonemem.schemas.config import DIMENSIONS
from clonemem.schemas.imports import ImportMode, ImportNote, ImportSummary
from clonemem.schemas.release import ReleaseFile, ReleasePrivacy
from clonemem.warehouse import Warehouse
from clonemem.warehouse.content import PersonaRows
from clonemem.warehouse.landing import Landing, PersonaLanding, land

MAX_REPORTED_PROBLEMS = 20

__all__ = [
    "ImportFailed",
    "ImportMode",
    "ImportNote",
    "ImportSummary",
    "Importer",
    "ParsedPersona",
    "Problem",
    "QuestionSource",
    "StreamingImporter",
    "check_benchmark_name",
    "decode_text",
    "detect_language",
    "expand_paths",
    "import_into_warehouse",
    "import_stream",
    "json_path",
    "load_personas",
    "load_stream",
    "parse_each",
    "persona_rows",
    "read_bytes",
    "read_text",
    "validation_message",
]


@dataclass(frozen=True)
class Problem:
    file: str
    path: str  # JSON path, e.g. $.questions[3].evidence[0].digital_trace_ids[1]
    message: str

    def __str__(self) -> str:
        return (
            f"{self.file}: {self.path}: {self.message}"
            if self.path
            else f"{self.file}: {self.message}"
        )


class ImportFailed(ValueError, UserError):
    """One or more input files are malformed, or the import is not allowed; nothing was loaded."""

    def __init__(self, problems: Sequence[Problem]):
        self.problems = list(problems)
        shown = [str(p) for p in self.problems[:MAX_REPORTED_PROBLEMS]]
        if len(self.problems) > MAX_REPORTED_PROBLEMS:
            shown.append(f"... and {len(self.problems) - MAX_REPORTED_PROBLEMS} more problems")
        super().__init__("\n".join(shown))


def json_path(loc: Iterable[str | int]) -> str:
    out = "$"
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def validation_message(err: Mapping[str, Any]) -> str:
    """One pydantic error as a short message that shows what was found."""
    if err["type"] == "missing":
        return "required field is missing"
    got = err.get("input")
    shown = (
        json.dumps(got, ensure_ascii=False, default=str)
        if not isinstance(got, dict | list)
        else type(got).__name__
    )
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return f"{err['msg']} (got {shown})"


def check_benchmark_name(name: str) -> None:
    """A benchmark is found by its name: an empty or blank one could never be named again."""
    if not name.strip():
        raise ImportFailed(
            [Problem("benchmark name", "", "must not be empty or blank (give --name)")]
        )


# -- reading files -----------------------------------------------------------------------------


def expand_paths(paths: Sequence[str | Path], suffixes: Sequence[str] = (".json",)) -> list[Path]:
    """Files as given, and every file with one of ``suffixes`` under a folder (recursively, sorted, hidden
    ones skipped); one problem per bad path."""
    files: list[Path] = []
    problems: list[Problem] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(
                p
                for p in path.rglob("*")
                if p.name.endswith(tuple(suffixes))
                and p.is_file()
                and not any(part.startswith(".") for part in p.relative_to(path).parts)
            )
            if not found:
                kinds = " or ".join(f"*{s}" for s in suffixes)
                problems.append(Problem(str(path), "$", f"folder holds no {kinds} files"))
            files.extend(found)
        elif path.is_file():
            files.append(path)
        elif path.exists():
            problems.append(Problem(str(path), "$", "not a regular file"))
        else:
            problems.append(Problem(str(path), "$", "no such file or folder"))
    if problems:
        raise ImportFailed(problems)
    seen: set[Path] = set()
    unique = []
    for f in files:  # a file named twice (directly and through its folder) is read once
        key = f.resolve()
        if key not in seen:
            seen.add(key)
            unique.append(f)
    return unique


_OTHER_BOMS = (
    (codecs.BOM_UTF32_LE, "UTF-32"),
    (codecs.BOM_UTF32_BE, "UTF-32"),
    (codecs.BOM_UTF16_LE, "UTF-16"),
    (codecs.BOM_UTF16_BE, "UTF-16"),
)


def decode_text(data: bytes, file: str) -> str:
    """UTF-8 text (a UTF-8 byte-order mark is dropped); anything else is one clear problem."""
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8) :]
    else:
        for bom, name in _OTHER_BOMS:
            if data.startswith(bom):
                raise ImportFailed(
                    [Problem(file, "$", f"file is {name} encoded; save it as UTF-8")]
                )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ImportFailed(
            [
                Problem(
                    file,
                    "$",
                    f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
                    "save it as UTF-8",
                )
            ]
        ) from None


def read_bytes(path: str | Path) -> bytes:
    path = Path(path)
    if path.is_dir():
        raise ImportFailed([Problem(str(path), "$", "is a folder, not a file")])
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise ImportFailed([Problem(str(path), "$", "no such file")]) from None
    except OSError as exc:
        raise ImportFailed(
            [Problem(str(path), "$", f"cannot read file: {exc.strerror or exc}")]
        ) from None


def read_text(path: str | Path) -> str:
    return decode_text(read_bytes(path), str(path))


# -- language ----------------------------------------------------------------------------------

_LANGUAGE_SUFFIX = re.compile(r"(?:^|[_.-])(en|zh)\.json$", re.IGNORECASE)


def _is_cjk(ch: str) -> bool:
    return "\u4e00" <= ch <= "\u9fff" or "\u3400" <= ch <= "\u4dbf" or "\uf900" <= ch <= "\ufaff"


def detect_language(file_name: str | None, texts: Iterable[str]) -> str | None:
    """``en``/``zh`` from a ``…_en.json``/``…_zh.json`` name, else from the share of Chinese characters."""
    if file_name:
        m = _LANGUAGE_SUFFIX.search(Path(file_name).name)
        if m:
            return m.group(1).lower()
    letters = cjk = 0
    for text in texts:
        for ch in text:
            if ch.isalpha():
                letters += 1
                cjk += _is_cjk(ch)
    if letters == 0:
        return None
    return "zh" if cjk / letters >= 0.3 else "en"


# -- what every importer produces --------------------------------------------------------------


@dataclass(frozen=True)
class QuestionSource:
    """What the importer decided about one question beyond the release format: the project's question
    type (each format maps its own labels), and the source's own extras (warehouse columns
    ``source_category`` and ``adversarial_answer``): the category as text (LoCoMo's '1'..'5', LongMemEval's
    and PersonaMem's question_type labels)."""

    question_type: str
    category: str | None = None
    adversarial_answer: str | None = None
    privacy: ReleasePrivacy | None = (
        None  # a privacy task's boundary (the release importer reads it back)
    )


@dataclass(frozen=True)
class ParsedPersona:
    """One persona read from a source file, checked and ready to land: its content in the release
    model, and per question (in order) what its source said beyond it."""

    file: str  # the path as given (messages)
    release: ReleaseFile
    language: str | None
    source_format: str = "clonemem"
    notes: tuple[ImportNote, ...] = ()
    sources: tuple[QuestionSource, ...] = ()
    narrative: str | None = (
        None  # who the person is, as the source says it (PersonaMem's system message)
    )

    def __post_init__(self) -> None:
        if len(self.sources) != len(self.release.items):
            raise ValueError(
                f"{self.file}: {len(self.release.items)} questions but {len(self.sources)} question "
                "sources; an importer gives one QuestionSource per question"
            )

    @property
    def key(self) -> tuple[str, str | None]:
        """A persona's identity within a benchmark: the same person may come in two languages."""
        return (self.release.person_id, self.language)


class Importer(ABC):
    """One source format. Subclasses declare their name and parse one file's text; reading paths and
    folders, collecting every problem of every file, and landing are shared."""

    name: ClassVar[str]  # the registry name (`clonemem import NAME ...`)
    description: ClassVar[str]  # one line for help texts
    source_format: ClassVar[str]  # recorded in the benchmark's config_json `formats`
    suffixes: ClassVar[tuple[str, ...]] = (".json",)  # files picked up from a folder
    streams: ClassVar[bool] = False  # a StreamingImporter: its files are never held whole
    # the standard protocols a benchmark of this format is scored by (clonemem.evaluation's protocols,
    # looked up through the benchmark's config_json `formats` and this registry)
    protocols: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def project_type(cls, category: str | None, label: str, question_id: str = "") -> str:
        """The project's question type for a question of this format with the source's category, label and
        id (how the release importer maps a question exported from a benchmark of this format back)."""
        return question_types.aliases().get(label, label)

    @abstractmethod
    def parse_text(self, text: str, file: str) -> list[ParsedPersona]:
        """Every persona in one file; raise :class:`ImportFailed` listing every problem found."""

    def parse_bytes(self, data: bytes, file: str) -> list[ParsedPersona]:
        return self.parse_text(decode_text(data, file), file)

    def parse_file(self, path: str | Path) -> list[ParsedPersona]:
        return self.parse_bytes(read_bytes(path), str(path))

    def group(self, files: Sequence[Path]) -> list[tuple[Path, ...]]:
        """The files read together (a format of several kinds of file, e.g. PersonaMem's questions CSV and
        its contexts JSONL); by default each file alone. Raise :class:`ImportFailed` for a file left over."""
        return [(f,) for f in files]

    def parse_group(self, data: Sequence[bytes], files: Sequence[str]) -> list[ParsedPersona]:
        """Every persona of one group of files (their bytes and names, in :meth:`group`'s order)."""
        return [p for d, f in zip(data, files, strict=True) for p in self.parse_bytes(d, f)]

    def parse_paths(self, paths: Sequence[str | Path]) -> list[ParsedPersona]:
        """Every file under the paths, parsed; all problems of all files in one error."""
        groups = self.group(expand_paths(paths, self.suffixes))
        return parse_each(
            groups, lambda g: self.parse_group([read_bytes(f) for f in g], [str(f) for f in g])
        )


class StreamingImporter(Importer):
    """A format whose files are too big to hold (LongMemEval's list of instances, hundreds of MB): a file is
    read item by item and landed in batches inside the import's one transaction, which a problem anywhere
    rolls back (:func:`load_stream`); every trace text is stored once."""

    streams: ClassVar[bool] = True

    @abstractmethod
    def iter_stream(
        self, stream: BinaryIO, file: str, problems: list[Problem]
    ) -> Iterator[ParsedPersona]:
        """The personas of one file, one at a time; a bad item adds its problems and is skipped."""

    def iter_file(self, path: Path, problems: list[Problem]) -> Iterator[ParsedPersona]:
        try:
            with path.open("rb") as stream:
                yield from self.iter_stream(stream, str(path), problems)
        except OSError as exc:
            problems.append(Problem(str(path), "$", f"cannot read file: {exc.strerror or exc}"))

    def parse_bytes(self, data: bytes, file: str) -> list[ParsedPersona]:
        problems: list[Problem] = []
        parsed = list(self.iter_stream(io.BytesIO(data), file, problems))
        if problems:
            raise ImportFailed(problems)
        return parsed

    def parse_file(self, path: str | Path) -> list[ParsedPersona]:
        problems: list[Problem] = []
        parsed = list(self.iter_file(Path(path), problems))
        if problems:
            raise ImportFailed(problems)
        return parsed

    def parse_text(self, text: str, file: str) -> list[ParsedPersona]:
        return self.parse_bytes(text.encode("utf-8"), file)


F = TypeVar("F")


def parse_each(
    files: Sequence[F], parse_one: Callable[[F], Sequence[ParsedPersona]]
) -> list[ParsedPersona]:
    """The one parse-every-file loop (direct imports and the import flow's cached tasks): every file is
    parsed, and the problems of all of them are raised together."""
    parsed: list[ParsedPersona] = []
    problems: list[Problem] = []
    for file in files:
        try:
            parsed.extend(parse_one(file))
        except ImportFailed as exc:
            problems.extend(exc.problems)
    if problems:
        raise ImportFailed(problems)
    return parsed


# -- rows --------------------------------------------------------------------------------------


def _naive_utc(value: dt.datetime) -> dt.datetime:
    """Timestamps are stored as naive UTC; naive inputs are taken as they are."""
    if value.tzinfo is None:
        return value
    return value.astimezone(dt.UTC).replace(tzinfo=None)


def persona_rows(
    persona: ParsedPersona, benchmark_name: str, seq: int, texts: set[str] | None = None
) -> PersonaRows:
    """A persona's rows. With ``texts`` (the text ids landed so far), each trace's text is stored once for
    all (``trace_texts``, content-addressed; the trace keeps its ``text_id`` and an empty ``content``)."""
    release = persona.release
    bid = benchmark_id(benchmark_name)
    pid = persona_id(benchmark_name, release.person_id, persona.language)
    rows = PersonaRows(pid)
    trace_key = {t.id: content_id(pid, "trace", t.id) for t in release.context}
    dates = [_naive_utc(t.event_date) for t in release.context]
    source_file = Path(persona.file).name
    rows.add(
        "personas",
        {
            "persona_id": pid,
            "benchmark_id": bid,
            "person_key": release.person_id,
            "seq": seq,
            "person_name": release.person_name,
            "language": persona.language,
            "big_five": None,
            "profile": None,
            "narrative": persona.narrative,
            "timeline_start": min(dates, default=None),
            "timeline_end": max(dates, default=None),
            "source_file": source_file,
        },
    )
    for i, t in enumerate(release.context):
        content, text_id = t.content, None
        if texts is not None:
            content, text_id = "", stable_hash(t.content, 32)
            if text_id not in texts:
                texts.add(text_id)
                rows.add("trace_texts", {"text_id": text_id, "content": t.content})
        rows.add(
            "traces",
            {
                "trace_id": trace_key[t.id],
                "persona_id": pid,
                "external_id": t.id,
                "seq": i,
                "medium": t.medium,
                "event_date": dates[i],
                "content": content,
                "text_id": text_id,
                "detailed_event_id": None,
                "intent": None,
                "audience": None,
                "key_information": None,
                "is_noise": False,
                "reached": None if t.reached is None else json.dumps(t.reached, ensure_ascii=False),
                "session_key": t.session_key,
                "speaker": t.speaker,
                "session_date": None if t.session_date is None else _naive_utc(t.session_date),
                "attachments": None
                if t.attachments is None
                else json.dumps([a.model_dump() for a in t.attachments], ensure_ascii=False),
            },
        )
    for qi, (q, source) in enumerate(zip(release.items, persona.sources, strict=True)):
        qid = content_id(pid, "question", q.id)
        qtype = source.question_type
        rows.add(
            "questions",
            {
                "question_id": qid,
                "benchmark_id": bid,
                "persona_id": pid,
                "external_id": q.id,
                "seq": qi,
                "question": q.question,
                "question_type": qtype,
                "question_type_known": qtype in question_types.names(),
                "dimension": q.dimension,
                "dimension_known": q.dimension in DIMENSIONS,
                "question_time": _naive_utc(q.question_time),
                "answer": q.answer,
                "correct_choice_id": q.correct_choice_id,
                "arc_id": None,
                "segment_id": None,
                "plan": None,
                "source_question_type": q.question_type,
                "source_category": source.category,
                "adversarial_answer": source.adversarial_answer,
                "evidence_sessions": None
                if q.evidence_sessions is None
                else json.dumps(q.evidence_sessions, ensure_ascii=False),
            },
        )
        for ti, tid in enumerate(q.digital_trace_ids):
            rows.add("question_traces", {"question_id": qid, "seq": ti, "trace_id": trace_key[tid]})
        for ci, choice in enumerate(q.choices):
            rows.add(
                "question_choices",
                {"question_id": qid, "seq": ci, "choice_id": choice.id, "text": choice.text},
            )
        for ei, ev in enumerate(q.evidence):
            eid = content_id(qid, "evidence", ei)
            rows.add(
                "evidence",
                {
                    "evidence_id": eid,
                    "persona_id": pid,
                    "detailed_event_id": None,
                    "seq": ei,
                    "kind": None,
                    "statement": ev.statement,
                },
            )
            rows.add("question_evidence", {"question_id": qid, "seq": ei, "evidence_id": eid})
            for ti, tid in enumerate(ev.digital_trace_ids):
                rows.add(
                    "evidence_traces", {"evidence_id": eid, "trace_id": trace_key[tid], "seq": ti}
                )
        if source.privacy is not None:
            _privacy_rows(rows, qid, source.privacy)
    for ni, note in enumerate(persona.notes):
        rows.add(
            "import_notes",
            {
                "benchmark_id": bid,
                "persona_id": pid,
                "seq": ni,
                "source_file": source_file,
                "json_path": note.path,
                "kind": note.kind,
                "raw": note.raw,
                "resolved": note.resolved,
            },
        )
    return rows


def _privacy_rows(rows: PersonaRows, qid: str, task: ReleasePrivacy) -> None:
    """A privacy task's recipient, purpose and tactic, its two sides over the question's evidence, and what
    the release says of each item: who its traces reached and, for a sensitive one, a matter per category
    with who may know it (the release keeps no arcs or subjects: the category stands for the subject)."""
    rows.add(
        "privacy_items",
        {
            "question_id": qid,
            "recipient": task.recipient,
            "purpose": task.purpose,
            "tactic": task.tactic,
        },
    )
    for role, items in (("necessary", task.necessary), ("sensitive", task.sensitive)):
        for i, item in enumerate(items):
            eid = content_id(qid, "evidence", item.evidence)
            rows.add(
                "privacy_item_evidence",
                {"question_id": qid, "role": role, "seq": i, "evidence_id": eid},
            )
            matter_ids = [content_id(eid, "privacy", c) for c in item.categories]
            for mid, category in zip(matter_ids, item.categories, strict=True):
                rows.add(
                    "privacy_matters",
                    {
                        "matter_id": mid,
                        "persona_id": rows.persona_id,
                        "seq": len(rows.tables.get("privacy_matters", [])),
                        "matter_key": category,
                        "category": category,
                        "arc_id": None,
                        "kinds": "[]",
                        "subject": category,
                        "may_know": json.dumps(item.may_know, ensure_ascii=False),
                    },
                )
            rows.add(
                "evidence_privacy",
                {
                    "evidence_id": eid,
                    "persona_id": rows.persona_id,
                    "sensitive": role == "sensitive",
                    "matter_ids": json.dumps(matter_ids),
                    "disclosed_to": json.dumps(item.disclosed_to, ensure_ascii=False),
                },
            )


# -- landing -----------------------------------------------------------------------------------


def _check_batch(personas: Sequence[ParsedPersona]) -> None:
    problems: list[Problem] = []
    seen: dict[tuple[str, str | None], str] = {}
    for p in personas:
        if p.key in seen:
            lang = f", both {p.language}" if p.language else ""
            problems.append(
                Problem(
                    p.file,
                    "$.person_id",
                    f"person {p.release.person_id!r} is also in "
                    f"{seen[p.key]}{lang}; a release size (e.g. 100k/, 500k/) is a benchmark of its own: "
                    "import each under its own --name",
                )
            )
        seen.setdefault(p.key, p.file)
    if problems:
        raise ImportFailed(problems)


@dataclass
class _Target:
    """Where an import lands: the benchmark, what it holds already, and what the import may do with it."""

    name: str
    bid: str
    old_personas: list[tuple[str, str, str | None, str]]
    old_config: dict
    existing: bool
    appending: bool
    first_seq: int

    def clash(self, p: ParsedPersona) -> Problem | None:
        """An appended persona the benchmark holds already."""
        held = {(key, lang): f for _, key, lang, f in self.old_personas} if self.appending else {}
        if p.key not in held:
            return None
        return Problem(
            p.file,
            "$.person_id",
            f"person {p.release.person_id!r} ({p.language}) is already in "
            f"benchmark {self.name!r} (from {held[p.key]}); use --replace",
        )

    def benchmark_row(self, tally: _Tally) -> dict:
        keep = self.appending
        files = tally.files | (set(self.old_config.get("files", [])) if keep else set())
        formats = tally.formats | (set(self.old_config.get("formats", [])) if keep else set())
        languages = tally.language_set | (
            {lang for _, _, lang, _ in self.old_personas} if keep else set()
        )
        return {
            "benchmark_id": self.bid,
            "name": self.name,
            "source": "imported",
            "is_offline": False,
            "language": next(iter(languages)) if len(languages) == 1 else None,
            "config_json": json.dumps(
                {"files": sorted(files), "formats": sorted(formats)}, ensure_ascii=False
            ),
            "gate_status": "pending",
        }  # new content: any earlier gate verdict no longer applies

    @property
    def drop(self) -> list[str]:
        return (
            [pid for pid, *_ in self.old_personas] if self.existing and not self.appending else []
        )

    @property
    def mode(self) -> str:
        return "appended" if self.appending else "replaced" if self.existing else "created"


def _target(wh: Warehouse, name: str, mode: ImportMode) -> _Target:
    """The benchmark an import writes; an existing one is refused unless replaced or appended to."""
    check_benchmark_name(name)
    bid = benchmark_id(name)
    existing = wh.rows(
        "SELECT source, config_json::VARCHAR FROM benchmarks WHERE benchmark_id = ?", [bid]
    )
    old_personas: list[tuple[str, str, str | None, str]] = []
    old_config: dict = {}
    if existing:
        source, config_json = existing[0]
        if source != "imported":
            raise ImportFailed(
                [
                    Problem(
                        f"benchmark {name!r}",
                        "",
                        f"exists and was {source}; import under another --name",
                    )
                ]
            )
        if mode == "create":
            raise ImportFailed(
                [
                    Problem(
                        f"benchmark {name!r}",
                        "",
                        "already exists; add --replace to replace it or --append to add to it",
                    )
                ]
            )
        old_personas = wh.rows(
            "SELECT persona_id, person_key, language, source_file FROM personas "
            "WHERE benchmark_id = ? ORDER BY seq",
            [bid],
        )
        old_config = json.loads(config_json) if config_json else {}
    appending = bool(existing) and mode == "append"
    first_seq = 0
    if appending:
        first_seq = (
            wh.scalar(
                "SELECT coalesce(max(seq) + 1, 0) FROM personas WHERE benchmark_id = ?", [bid]
            )
            or 0
        )
    return _Target(name, bid, old_personas, old_config, bool(existing), appending, first_seq)


def load_personas(
    wh: Warehouse, personas: Sequence[ParsedPersona], name: str, mode: ImportMode = "create"
) -> ImportSummary:
    """Land parsed personas as benchmark ``name`` in one transaction.

    An existing benchmark is refused unless ``mode`` is ``replace`` (its content is swapped atomically)
    or ``append`` (the personas are added; one that is already there is refused)."""
    check_benchmark_name(name)
    _check_batch(personas)
    target = _target(wh, name, mode)
    clashes = [c for p in personas if (c := target.clash(p)) is not None]
    if clashes:
        raise ImportFailed(clashes)
    all_rows = [persona_rows(p, name, target.first_seq + i) for i, p in enumerate(personas)]
    tally = _Tally()
    for p in personas:
        tally.add(p)
    land(
        wh,
        Landing(
            target.bid,
            "persona",
            [PersonaLanding(rows) for rows in all_rows],
            completes=True,
            benchmark=target.benchmark_row(tally),
            drop_personas=target.drop,
        ),
    )
    return _summary(wh, target.bid, name, tally, target.mode)


@dataclass
class _Tally:
    """What an import's summary counts, added up persona by persona (a streamed import holds none of them)."""

    personas: int = 0
    traces: int = 0
    questions: int = 0
    free_text_only: int = 0
    evidence_without_traces: int = 0
    questions_without_evidence: int = 0
    unknown: Counter[str] = field(default_factory=Counter)
    relabelled: Counter[str] = field(default_factory=Counter)
    languages: Counter[str] = field(default_factory=Counter)
    language_set: set[str | None] = field(default_factory=set)
    files: set[str] = field(default_factory=set)
    formats: set[str] = field(default_factory=set)
    notes: list[ImportNote] = field(default_factory=list)

    def add(self, p: ParsedPersona) -> None:
        self.personas += 1
        self.traces += len(p.release.context)
        self.languages[p.language or "unknown"] += 1
        self.language_set.add(p.language)
        self.files.add(Path(p.file).name)
        self.formats.add(p.source_format)
        self.notes.extend(p.notes)
        for q, source in zip(p.release.items, p.sources, strict=True):
            self.questions += 1
            self.free_text_only += not q.choices
            self.questions_without_evidence += not q.evidence
            self.evidence_without_traces += sum(1 for e in q.evidence if not e.digital_trace_ids)
            if source.question_type not in question_types.names():
                self.unknown[source.question_type] += 1
            elif source.question_type != q.question_type:
                self.relabelled[f"{q.question_type} -> {source.question_type}"] += 1


def _summary(wh: Warehouse, bid: str, name: str, tally: _Tally, mode: str) -> ImportSummary:
    totals = wh.rows("SELECT personas, traces, questions FROM v_benchmarks WHERE id = ?", [bid])[0]
    return ImportSummary(
        benchmark_id=bid,
        name=name,
        personas=tally.personas,
        traces=tally.traces,
        questions=tally.questions,
        free_text_only=tally.free_text_only,
        unknown_question_types=dict(sorted(tally.unknown.items())),
        evidence_without_traces=tally.evidence_without_traces,
        mode=mode,
        total_personas=totals[0],
        total_traces=totals[1],
        total_questions=totals[2],
        languages=dict(sorted(tally.languages.items())),
        relabelled=dict(sorted(tally.relabelled.items())),
        questions_without_evidence=tally.questions_without_evidence,
        notes=tuple(tally.notes),
    )


# a streamed import lands a batch once it holds this many traces (or personas): what bounds its memory
STREAM_BATCH_TRACES = 20_000
STREAM_BATCH_PERSONAS = 50


def load_stream(
    wh: Warehouse,
    importer: StreamingImporter,
    files: Sequence[Path],
    name: str,
    mode: ImportMode = "create",
) -> ImportSummary:
    """Land a streaming format's files as benchmark ``name`` in one transaction, a batch of personas at a
    time (never all of them held), every trace text stored once (``trace_texts``). The files are read once:
    after a first problem nothing more is landed, the rest is read for its problems, and the transaction
    rolls back, so a bad file stores nothing."""
    target = _target(wh, name, mode)
    tally, texts, seen = _Tally(), set[str](), dict[tuple[str, str | None], str]()
    problems: list[Problem] = []
    batch: list[PersonaLanding] = []
    held = [0]  # traces in the batch

    def flush(drop: Sequence[str] = ()) -> None:
        if not problems:
            land(wh, Landing(target.bid, "persona", batch, fresh=True, drop_personas=drop))
        batch.clear()
        held[0] = 0

    with wh.transaction():
        flush(target.drop)  # a replaced benchmark's personas go first
        for file in files:
            for p in importer.iter_file(file, problems):
                if p.key in seen:
                    problems.append(
                        Problem(
                            p.file,
                            "$.person_id",
                            f"person {p.release.person_id!r} is also in "
                            f"{seen[p.key]}; every scope needs its own id",
                        )
                    )
                elif (clash := target.clash(p)) is not None:
                    problems.append(clash)
                seen.setdefault(p.key, p.file)
                if problems:
                    continue
                batch.append(
                    PersonaLanding(persona_rows(p, name, target.first_seq + tally.personas, texts))
                )
                tally.add(p)
                held[0] += len(p.release.context)
                if held[0] >= STREAM_BATCH_TRACES or len(batch) >= STREAM_BATCH_PERSONAS:
                    flush()
        if problems:
            raise ImportFailed(problems)
        flush()
        land(
            wh,
            Landing(
                target.bid, "persona", [], completes=True, benchmark=target.benchmark_row(tally)
            ),
        )
    return _summary(wh, target.bid, name, tally, target.mode)


def import_stream(
    warehouse_path: str | Path,
    importer: StreamingImporter,
    paths: Sequence[str | Path],
    name: str,
    mode: ImportMode = "create",
    *,
    wait_s: float | None = None,
) -> ImportSummary:
    """A streaming format's import (:func:`load_stream`): the files are read once, as they are landed, in
    one transaction; a bad file rolls it back, and a failed import into a new warehouse leaves no file."""
    check_benchmark_name(name)
    files = expand_paths(
        paths, importer.suffixes
    )  # a missing file fails before the warehouse is opened
    with (
        _new_warehouse_removed_on_failure(warehouse_path) as path,
        Warehouse.open_writer(path, wait_s=wait_s) as wh,
    ):
        return load_stream(wh, importer, files, name, mode)


@contextmanager
def _new_warehouse_removed_on_failure(warehouse_path: str | Path) -> Iterator[Path]:
    path = Path(warehouse_path).expanduser().resolve()
    existed = path.exists()
    try:
        yield path
    except BaseException:
        if not existed:
            for leftover in (
                path,
                path.with_name(path.name + ".wal"),
                path.with_name(path.name + ".lock"),
            ):
                leftover.unlink(missing_ok=True)
        raise


def import_into_warehouse(
    warehouse_path: str | Path,
    parse: Callable[[], Sequence[ParsedPersona]],
    name: str,
    mode: ImportMode = "create",
    *,
    wait_s: float | None = None,
) -> ImportSummary:
    """Parse first (the warehouse is not touched by a bad file), then land; a failed import into a
    warehouse that did not exist leaves no file behind (nor its lock file)."""
    check_benchmark_name(name)
    personas = parse()
    with (
        _new_warehouse_removed_on_failure(warehouse_path) as path,
        Warehouse.open_writer(path, wait_s=wait_s) as wh,
    ):
        return load_personas(wh, personas, name, mode)
