"""Import and export of the CloneMem release format (SPEC §6), and the landing shared by every importer.

Import reads and validates every file completely before the warehouse is even opened; a file that
fails loads nothing, the whole import is one transaction, and a failed import into a warehouse that
did not exist leaves no file behind. Export writes each persona's file atomically.
"""

from __future__ import annotations

import codecs
import datetime as dt
import json
import os
import re
import tempfile
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import ValidationError

from clonemem.ids import benchmark_id, content_id, persona_id
from clonemem.schemas import question_types
from clonemem.schemas.config import DIMENSIONS
from clonemem.schemas.release import QUESTION_KEYS, ReleaseFile, ReleaseQuestion
from clonemem.warehouse import Warehouse
from clonemem.warehouse.catalog import resolve_benchmark
from clonemem.warehouse.content import PersonaRows
from clonemem.warehouse.landing import Landing, PersonaLanding, land

MAX_REPORTED_PROBLEMS = 20
ImportMode = Literal["create", "replace", "append"]

# LoCoMo's numbered categories: (label kept in questions.source_question_type, project type).
# Multi-hop items gather facts scattered over sessions (closest: pattern); temporal items ask when one
# thing happened (single_point_factual); open-domain items infer from what was said (inferential);
# adversarial items ask about something never said (unanswerable).
LOCOMO_CATEGORIES: dict[int, tuple[str, str]] = {
    1: ("multi_hop", "pattern"),
    2: ("temporal", "single_point_factual"),
    3: ("open_domain", "inferential"),
    4: ("single_hop", "single_point_factual"),
    5: ("adversarial", "unanswerable"),
}


def canonical_question_type(label: str, locomo_category: int | None = None) -> str:
    """The project's type for a source label (unknown labels are kept as they are, and flagged)."""
    if locomo_category in LOCOMO_CATEGORIES:
        return LOCOMO_CATEGORIES[locomo_category][1]
    return question_types.aliases().get(label, label)  # the published files' own labels (``inference``)


@dataclass(frozen=True)
class Problem:
    file: str
    path: str  # JSON path, e.g. $.questions[3].evidence[0].digital_trace_ids[1]
    message: str

    def __str__(self) -> str:
        return f"{self.file}: {self.path}: {self.message}" if self.path else f"{self.file}: {self.message}"


class ReleaseError(ValueError):
    """One or more input files are malformed, or the import is not allowed; nothing was loaded."""

    def __init__(self, problems: Sequence[Problem]):
        self.problems = list(problems)
        shown = [str(p) for p in self.problems[:MAX_REPORTED_PROBLEMS]]
        if len(self.problems) > MAX_REPORTED_PROBLEMS:
            shown.append(f"... and {len(self.problems) - MAX_REPORTED_PROBLEMS} more problems")
        super().__init__("\n".join(shown))


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


def json_path(loc: Iterable[str | int]) -> str:
    out = "$"
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


# -- reading files -----------------------------------------------------------------------------


def expand_paths(paths: Sequence[str | Path]) -> list[Path]:
    """Files as given, and every ``*.json`` under a folder (recursively, sorted); one problem per bad path."""
    files: list[Path] = []
    problems: list[Problem] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(p for p in path.rglob("*.json")
                           if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts))
            if not found:
                problems.append(Problem(str(path), "$", "folder holds no *.json files"))
            files.extend(found)
        elif path.is_file():
            files.append(path)
        elif path.exists():
            problems.append(Problem(str(path), "$", "not a regular file"))
        else:
            problems.append(Problem(str(path), "$", "no such file or folder"))
    if problems:
        raise ReleaseError(problems)
    seen: set[Path] = set()
    unique = []
    for f in files:  # a file named twice (directly and through its folder) is read once
        key = f.resolve()
        if key not in seen:
            seen.add(key)
            unique.append(f)
    return unique


_OTHER_BOMS = ((codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"),
               (codecs.BOM_UTF16_LE, "UTF-16"), (codecs.BOM_UTF16_BE, "UTF-16"))


def decode_json_bytes(data: bytes, file: str) -> str:
    """UTF-8 text (a UTF-8 byte-order mark is dropped); anything else is one clear problem."""
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8):]
    else:
        for bom, name in _OTHER_BOMS:
            if data.startswith(bom):
                raise ReleaseError([Problem(file, "$", f"file is {name} encoded; save it as UTF-8")])
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ReleaseError([Problem(file, "$", f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
                                               "save it as UTF-8")]) from None


def read_json_text(path: str | Path) -> str:
    path = Path(path)
    if path.is_dir():
        raise ReleaseError([Problem(str(path), "$", "is a folder, not a file")])
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ReleaseError([Problem(str(path), "$", "no such file")]) from None
    except OSError as exc:
        raise ReleaseError([Problem(str(path), "$", f"cannot read file: {exc.strerror or exc}")]) from None
    return decode_json_bytes(data, str(path))


# -- parsing release files ---------------------------------------------------------------------


def parse_release_text(data: bytes | str, file: str) -> ReleaseFile:
    """Parse and check one release file; raise ReleaseError listing every problem found."""
    text = decode_json_bytes(data, file) if isinstance(data, bytes) else data.removeprefix("\ufeff")
    try:
        release = ReleaseFile.model_validate_json(text)
    except ValidationError as exc:
        problems = []
        for err in exc.errors(include_url=False):
            if err["type"] == "json_invalid":
                problems.append(Problem(file, "$", f"not valid JSON: {err['ctx'].get('error', err['msg'])}"))
            else:
                problems.append(Problem(file, json_path(err["loc"]), _message(err)))
        raise ReleaseError(problems) from None
    problems = check_references(release, file)
    if problems:
        raise ReleaseError(problems)
    return release


def parse_release_file(path: str | Path) -> ReleaseFile:
    return parse_release_text(read_json_text(path), str(path))


def _message(err: dict) -> str:
    if err["type"] == "missing":
        return "required field is missing"
    got = err.get("input")
    shown = json.dumps(got, ensure_ascii=False, default=str) if not isinstance(got, dict | list) else type(got).__name__
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return f"{err['msg']} (got {shown})"


def check_references(release: ReleaseFile, file: str) -> list[Problem]:
    """Checks the schema cannot express: one question list, unique ids, trace ids that exist, choices."""
    problems: list[Problem] = []
    if release.questions is not None and release.qa_items is not None:
        problems.append(Problem(file, "$", "both `questions` and `qa_items` are present; a file has one question list"))
    elif release.questions is None and release.qa_items is None:
        problems.append(Problem(file, "$.questions", "required field is missing (the question list, "
                                                     f"under `{QUESTION_KEYS[0]}` or `{QUESTION_KEYS[1]}`)"))
    key = release.questions_key
    trace_ids: dict[str, int] = {}
    for i, trace in enumerate(release.context):
        if trace.id in trace_ids:
            problems.append(Problem(file, f"$.context[{i}].id",
                                    f"duplicate trace id {trace.id!r} (first at $.context[{trace_ids[trace.id]}])"))
        else:
            trace_ids[trace.id] = i
    question_ids: dict[str, int] = {}
    for qi, q in enumerate(release.items):
        base = f"$.{key}[{qi}]"
        if q.id in question_ids:
            problems.append(Problem(file, f"{base}.id",
                                    f"duplicate question id {q.id!r} (first at $.{key}[{question_ids[q.id]}])"))
        else:
            question_ids[q.id] = qi
        for ti, tid in enumerate(q.digital_trace_ids):
            if tid not in trace_ids:
                problems.append(Problem(file, f"{base}.digital_trace_ids[{ti}]", f"trace {tid!r} is not in context"))
        for ei, ev in enumerate(q.evidence):
            for ti, tid in enumerate(ev.digital_trace_ids):
                if tid not in trace_ids:
                    problems.append(Problem(file, f"{base}.evidence[{ei}].digital_trace_ids[{ti}]",
                                            f"evidence names trace {tid!r}, which is not in context"))
        choice_ids = [c.id for c in q.choices]
        seen: set[str] = set()
        for ci, cid in enumerate(choice_ids):
            if cid in seen:
                problems.append(Problem(file, f"{base}.choices[{ci}].id", f"duplicate choice id {cid!r}"))
            seen.add(cid)
        if q.choices and q.correct_choice_id is None:
            problems.append(Problem(file, f"{base}.correct_choice_id", "choices are given but correct_choice_id is null"))
        elif q.correct_choice_id is not None and q.correct_choice_id not in seen:
            where = "is not one of the choice ids" if q.choices else "is set but choices is empty"
            problems.append(Problem(file, f"{base}.correct_choice_id", f"{q.correct_choice_id!r} {where}"))
    return problems


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
class ParsedPersona:
    """One persona read from a source file, checked and ready to land."""

    file: str  # the path as given (messages)
    release: ReleaseFile
    language: str | None
    source_format: str = "clonemem"
    notes: tuple[ImportNote, ...] = ()

    @property
    def key(self) -> tuple[str, str | None]:
        """A persona's identity within a benchmark: the same person may come in two languages."""
        return (self.release.person_id, self.language)


def parse_release_persona(path: str | Path, text: str | None = None) -> ParsedPersona:
    rel = parse_release_text(read_json_text(path) if text is None else text, str(path))
    return ParsedPersona(str(path), rel, detect_language(str(path), (t.content for t in rel.context)))


def parse_release_paths(paths: Sequence[str | Path]) -> list[ParsedPersona]:
    """Every file under the paths, parsed; all problems of all files in one error."""
    parsed, problems = [], []
    for path in expand_paths(paths):
        try:
            parsed.append(parse_release_persona(path))
        except ReleaseError as exc:
            problems.extend(exc.problems)
    if problems:
        raise ReleaseError(problems)
    return parsed


# -- rows --------------------------------------------------------------------------------------


def _naive_utc(value: dt.datetime) -> dt.datetime:
    """Timestamps are stored as naive UTC; naive inputs are taken as they are."""
    if value.tzinfo is None:
        return value
    return value.astimezone(dt.UTC).replace(tzinfo=None)


def persona_rows(persona: ParsedPersona, benchmark_name: str, seq: int) -> PersonaRows:
    release = persona.release
    bid = benchmark_id(benchmark_name)
    pid = persona_id(benchmark_name, release.person_id, persona.language)
    rows = PersonaRows(pid)
    trace_key = {t.id: content_id(pid, "trace", t.id) for t in release.context}
    dates = [_naive_utc(t.event_date) for t in release.context]
    source_file = Path(persona.file).name
    rows.add("personas", {
        "persona_id": pid, "benchmark_id": bid, "person_key": release.person_id, "seq": seq,
        "person_name": release.person_name, "language": persona.language, "big_five": None, "profile": None,
        "narrative": None, "timeline_start": min(dates, default=None), "timeline_end": max(dates, default=None),
        "source_file": source_file,
    })
    for i, t in enumerate(release.context):
        rows.add("traces", {
            "trace_id": trace_key[t.id], "persona_id": pid, "external_id": t.id, "seq": i, "medium": t.medium,
            "event_date": dates[i], "content": t.content, "detailed_event_id": None, "intent": None,
            "audience": None, "key_information": None, "is_noise": False,
        })
    for qi, q in enumerate(release.items):
        qid = content_id(pid, "question", q.id)
        qtype = canonical_question_type(q.question_type, q.locomo_category)
        rows.add("questions", {
            "question_id": qid, "benchmark_id": bid, "persona_id": pid, "external_id": q.id, "seq": qi,
            "question": q.question, "question_type": qtype, "question_type_known": qtype in question_types.names(),
            "dimension": q.dimension, "dimension_known": q.dimension in DIMENSIONS,
            "question_time": _naive_utc(q.question_time), "answer": q.answer, "correct_choice_id": q.correct_choice_id,
            "arc_id": None, "segment_id": None, "plan": None, "source_question_type": q.question_type,
            "source_category": q.locomo_category, "adversarial_answer": q.adversarial_answer,
        })
        for ti, tid in enumerate(q.digital_trace_ids):
            rows.add("question_traces", {"question_id": qid, "seq": ti, "trace_id": trace_key[tid]})
        for ci, choice in enumerate(q.choices):
            rows.add("question_choices", {"question_id": qid, "seq": ci, "choice_id": choice.id, "text": choice.text})
        for ei, ev in enumerate(q.evidence):
            eid = content_id(qid, "evidence", ei)
            rows.add("evidence", {"evidence_id": eid, "persona_id": pid, "detailed_event_id": None, "seq": ei,
                                  "kind": None, "statement": ev.statement})
            rows.add("question_evidence", {"question_id": qid, "seq": ei, "evidence_id": eid})
            for ti, tid in enumerate(ev.digital_trace_ids):
                rows.add("evidence_traces", {"evidence_id": eid, "trace_id": trace_key[tid], "seq": ti})
    for ni, note in enumerate(persona.notes):
        rows.add("import_notes", {"benchmark_id": bid, "persona_id": pid, "seq": ni, "source_file": source_file,
                                  "json_path": note.path, "kind": note.kind, "raw": note.raw, "resolved": note.resolved})
    return rows


# -- landing -----------------------------------------------------------------------------------


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


def _check_batch(personas: Sequence[ParsedPersona]) -> None:
    problems, seen = [], {}
    for p in personas:
        if p.key in seen:
            lang = f", both {p.language}" if p.language else ""
            problems.append(Problem(p.file, "$.person_id", f"person {p.release.person_id!r} is also in "
                                    f"{seen[p.key]}{lang}; a release size (e.g. 100k/, 500k/) is a benchmark of its own: "
                                    "import each under its own --name"))
        seen.setdefault(p.key, p.file)
    if problems:
        raise ReleaseError(problems)


def load_personas(wh: Warehouse, personas: Sequence[ParsedPersona], name: str,
                  mode: ImportMode = "create") -> ImportSummary:
    """Land parsed personas as benchmark ``name`` in one transaction.

    An existing benchmark is refused unless ``mode`` is ``replace`` (its content is swapped atomically)
    or ``append`` (the personas are added; one that is already there is refused)."""
    _check_batch(personas)
    bid = benchmark_id(name)
    existing = wh.rows("SELECT source, config_json::VARCHAR FROM benchmarks WHERE benchmark_id = ?", [bid])
    old_personas: list[tuple[str, str, str | None, str]] = []
    old_config: dict = {}
    if existing:
        source, config_json = existing[0]
        if source != "imported":
            raise ReleaseError([Problem(f"benchmark {name!r}", "", f"exists and was {source}; "
                                                                   "import under another --name")])
        if mode == "create":
            raise ReleaseError([Problem(f"benchmark {name!r}", "", "already exists; add --replace to replace it "
                                                                   "or --append to add to it")])
        old_personas = wh.rows("SELECT persona_id, person_key, language, source_file FROM personas "
                               "WHERE benchmark_id = ? ORDER BY seq", [bid])
        old_config = json.loads(config_json) if config_json else {}
    appending = bool(existing) and mode == "append"
    if appending:
        held = {(key, lang): f for _, key, lang, f in old_personas}
        clashes = [Problem(p.file, "$.person_id", f"person {p.release.person_id!r} ({p.language}) is already in "
                                                  f"benchmark {name!r} (from {held[p.key]}); use --replace")
                   for p in personas if p.key in held]
        if clashes:
            raise ReleaseError(clashes)
    first_seq = len(old_personas) if appending else 0
    if appending:
        first_seq = (wh.scalar("SELECT coalesce(max(seq) + 1, 0) FROM personas WHERE benchmark_id = ?", [bid]) or 0)
    all_rows = [persona_rows(p, name, first_seq + i) for i, p in enumerate(personas)]
    files = {Path(p.file).name for p in personas} | (set(old_config.get("files", [])) if appending else set())
    formats = {p.source_format for p in personas} | (set(old_config.get("formats", [])) if appending else set())
    languages = {p.language for p in personas} | ({lang for _, _, lang, _ in old_personas} if appending else set())
    land(wh, Landing(
        bid, "persona", [PersonaLanding(rows) for rows in all_rows], completes=True,
        benchmark={"benchmark_id": bid, "name": name, "source": "imported", "is_offline": False,
                   "language": next(iter(languages)) if len(languages) == 1 else None,
                   "config_json": json.dumps({"files": sorted(files), "formats": sorted(formats)}, ensure_ascii=False),
                   "gate_status": "pending"},  # new content: any earlier gate verdict no longer applies
        drop_personas=[pid for pid, *_ in old_personas] if existing and not appending else ()))
    return _summary(wh, bid, name, personas, "appended" if appending else "replaced" if existing else "created")


def _summary(wh: Warehouse, bid: str, name: str, personas: Sequence[ParsedPersona], mode: str) -> ImportSummary:
    questions = [q for p in personas for q in p.release.items]
    unknown: Counter[str] = Counter()
    relabelled: Counter[str] = Counter()
    for q in questions:
        qtype = canonical_question_type(q.question_type, q.locomo_category)
        if qtype not in question_types.names():
            unknown[qtype] += 1
        elif qtype != q.question_type:
            relabelled[f"{q.question_type} -> {qtype}"] += 1
    totals = wh.rows("SELECT personas, traces, questions FROM v_benchmarks WHERE id = ?", [bid])[0]
    return ImportSummary(
        benchmark_id=bid, name=name, personas=len(personas),
        traces=sum(len(p.release.context) for p in personas), questions=len(questions),
        free_text_only=sum(1 for q in questions if not q.choices),
        unknown_question_types=dict(sorted(unknown.items())),
        evidence_without_traces=sum(1 for q in questions for e in q.evidence if not e.digital_trace_ids),
        mode=mode, total_personas=totals[0], total_traces=totals[1], total_questions=totals[2],
        languages=dict(sorted(Counter(p.language or "unknown" for p in personas).items())),
        relabelled=dict(sorted(relabelled.items())),
        questions_without_evidence=sum(1 for q in questions if not q.evidence),
        notes=tuple(n for p in personas for n in p.notes),
    )


def import_release_files(wh: Warehouse, paths: Sequence[str | Path], name: str,
                         mode: ImportMode = "create") -> ImportSummary:
    """Parse every file first (collecting all problems), then load them all or nothing."""
    return load_personas(wh, parse_release_paths(paths), name, mode)


def import_into_warehouse(warehouse_path: str | Path, parse: Callable[[], Sequence[ParsedPersona]], name: str,
                          mode: ImportMode = "create", *, wait_s: float | None = None) -> ImportSummary:
    """Parse first (the warehouse is not touched by a bad file), then land; a failed import into a
    warehouse that did not exist leaves no file behind (nor its lock file)."""
    personas = parse()
    path = Path(warehouse_path).expanduser().resolve()
    existed = path.exists()
    try:
        with Warehouse.open_writer(path, wait_s=wait_s) as wh:
            return load_personas(wh, personas, name, mode)
    except BaseException:
        if not existed:
            for leftover in (path, path.with_name(path.name + ".wal"), path.with_name(path.name + ".lock")):
                leftover.unlink(missing_ok=True)
        raise


# -- export ------------------------------------------------------------------------------------


def _iso(value: dt.datetime) -> str:
    return value.isoformat()


def export_persona(wh: Warehouse, pid: str, questions_key: str = "questions") -> dict:
    """One persona as a release document; question types as the source labelled them (``inference``)."""
    if questions_key not in QUESTION_KEYS:
        raise ValueError(f"questions_key must be one of {', '.join(QUESTION_KEYS)}, got {questions_key!r}")
    (person_key, person_name, bid) = wh.rows(
        "SELECT person_key, person_name, benchmark_id FROM personas WHERE persona_id = ?", [pid])[0]
    context = [
        {"id": ext, "medium": medium, "event_date": _iso(date), "content": content}
        for ext, medium, date, content in wh.rows(
            "SELECT external_id, medium, event_date, content FROM traces WHERE persona_id = ? ORDER BY seq, external_id",
            [pid])
    ]
    ext_of = dict(wh.rows("SELECT trace_id, external_id FROM traces WHERE persona_id = ?", [pid]))
    q_traces = _grouped(wh.rows(
        "SELECT qt.question_id, qt.trace_id FROM question_traces qt JOIN questions q USING (question_id) "
        "WHERE q.persona_id = ? ORDER BY qt.question_id, qt.seq", [pid]))
    q_choices = _grouped(wh.rows(
        "SELECT c.question_id, {'id': c.choice_id, 'text': c.text} FROM question_choices c "
        "JOIN questions q USING (question_id) WHERE q.persona_id = ? ORDER BY c.question_id, c.seq", [pid]))
    q_evidence = _grouped(wh.rows(
        "SELECT qe.question_id, {'statement': e.statement, 'ids': "
        "  coalesce((SELECT list(et.trace_id ORDER BY et.seq) FROM evidence_traces et "
        "            WHERE et.evidence_id = e.evidence_id), [])} "
        "FROM question_evidence qe JOIN evidence e USING (evidence_id) JOIN questions q USING (question_id) "
        "WHERE q.persona_id = ? ORDER BY qe.question_id, qe.seq", [pid]))
    questions = []
    for (qid, ext, question, qtype, qtime, answer, dim, correct, category, trap) in wh.rows(
        "SELECT question_id, external_id, question, coalesce(source_question_type, question_type), question_time, "
        "answer, dimension, correct_choice_id, source_category, adversarial_answer "
        "FROM questions WHERE persona_id = ? ORDER BY seq, external_id", [pid]):
        item = {
            "id": ext, "question": question, "question_type": qtype, "question_time": _iso(qtime),
            "answer": answer, "dimension": dim,
            "digital_trace_ids": [ext_of[t] for t in q_traces.get(qid, [])],
            "evidence": [{"statement": e["statement"], "digital_trace_ids": [ext_of[t] for t in e["ids"]]}
                         for e in q_evidence.get(qid, [])],
            "choices": q_choices.get(qid, []),
            "correct_choice_id": correct,
        }
        if category is not None:  # extra fields (other readers ignore them): a LoCoMo import survives export
            item["locomo_category"] = category
        if trap is not None:
            item["adversarial_answer"] = trap
        questions.append(item)
    out: dict = {"person_name": person_name, "person_id": person_key, "context": context, questions_key: questions}
    source, offline = wh.rows("SELECT source, is_offline FROM benchmarks WHERE benchmark_id = ?", [bid])[0]
    if source == "generated":
        # Extra top-level field (importers ignore unknown fields): provenance, and the offline label.
        out["generated_by"] = {"pipeline": "clonemem", "offline": bool(offline)}
    return out


def _grouped(rows: list[tuple]) -> dict:
    out: dict = {}
    for key, value in rows:
        out.setdefault(key, []).append(value)
    return out


_UNSAFE = re.compile(r"[^\w.-]+")


def _safe_name(text: str) -> str:
    name = _UNSAFE.sub("_", unicodedata.normalize("NFC", text)).lstrip(".")
    return name or "persona"


def export_file_names(rows: Sequence[tuple[str, str, str | None, str | None]]) -> list[str]:
    """A file name per persona (persona_id, key, language, source_file): an imported persona keeps its
    source file's name (``…_benchmark_zh.json``), others get ``<person_id>_benchmark_<lang>.json``, so the
    language survives a round trip; clashes get the persona's position appended."""
    names = []
    for _, key, lang, source_file in rows:
        if source_file and source_file.lower().endswith(".json"):
            names.append(_safe_name(source_file))
        else:
            names.append(_safe_name(f"{key}_benchmark_{lang}" if lang else key) + ".json")
    counts = Counter(names)
    return [n if counts[n] == 1 else f"{n[:-5]}-{i}.json" for i, n in enumerate(names)]


def export_release(wh: Warehouse, ref: str, out_dir: str | Path, questions_key: str = "questions") -> list[Path]:
    """Write one file per persona of the benchmark; each file appears whole or not at all."""
    bid, _ = resolve_benchmark(wh, ref)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = wh.rows("SELECT persona_id, person_key, language, source_file FROM personas WHERE benchmark_id = ? "
                   "ORDER BY seq", [bid])
    written = []
    for (pid, *_), file_name in zip(rows, export_file_names(rows), strict=True):
        doc = export_persona(wh, pid, questions_key)
        target = out / file_name
        fd, tmp = tempfile.mkstemp(dir=out, prefix=".export-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(doc, fh, ensure_ascii=False, indent=1)
                fh.write("\n")
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        written.append(target)
    return written
