"""Import and export of the CloneMem release format (SPEC §6).

Import validates every file completely before anything is written; a file that fails loads nothing,
and the whole import is one transaction. Export writes each persona's file atomically.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from clonemem.ids import content_id
from clonemem.schemas.config import DIMENSIONS, QUESTION_TYPES
from clonemem.schemas.release import ReleaseFile
from clonemem.warehouse import Warehouse
from clonemem.warehouse.content import PERSONA_TABLES, delete_persona

MAX_REPORTED_PROBLEMS = 20


@dataclass(frozen=True)
class Problem:
    file: str
    path: str  # JSON path, e.g. $.questions[3].evidence[0].digital_trace_ids[1]
    message: str

    def __str__(self) -> str:
        return f"{self.file}: {self.path}: {self.message}"


class ReleaseError(ValueError):
    """One or more release files are malformed; nothing was loaded."""

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


# -- parsing -----------------------------------------------------------------------------------


def parse_release_text(data: bytes | str, file: str) -> ReleaseFile:
    """Parse and check one release file; raise ReleaseError listing every problem found."""
    try:
        release = ReleaseFile.model_validate_json(data)
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
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ReleaseError([Problem(str(path), "$", f"cannot read file: {exc.strerror or exc}")]) from None
    return parse_release_text(data, str(path))


def _message(err: dict) -> str:
    if err["type"] == "missing":
        return "required field is missing"
    got = err.get("input")
    shown = json.dumps(got, ensure_ascii=False, default=str) if not isinstance(got, dict | list) else type(got).__name__
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return f"{err['msg']} (got {shown})"


def check_references(release: ReleaseFile, file: str) -> list[Problem]:
    """Referential checks the schema cannot express: unique ids, trace ids that exist, choice consistency."""
    problems: list[Problem] = []
    trace_ids: dict[str, int] = {}
    for i, trace in enumerate(release.context):
        if trace.id in trace_ids:
            problems.append(Problem(file, f"$.context[{i}].id",
                                    f"duplicate trace id {trace.id!r} (first at $.context[{trace_ids[trace.id]}])"))
        else:
            trace_ids[trace.id] = i
    question_ids: dict[str, int] = {}
    for qi, q in enumerate(release.questions):
        base = f"$.questions[{qi}]"
        if q.id in question_ids:
            problems.append(Problem(file, f"{base}.id",
                                    f"duplicate question id {q.id!r} (first at $.questions[{question_ids[q.id]}])"))
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


# -- rows --------------------------------------------------------------------------------------


def benchmark_id(name: str) -> str:
    return content_id("benchmark", name)


def persona_id(benchmark_name: str, person_key: str) -> str:
    return content_id("benchmark", benchmark_name, "persona", person_key)


def _naive_utc(value: dt.datetime) -> dt.datetime:
    """Timestamps are stored as naive UTC; naive inputs are taken as they are."""
    if value.tzinfo is None:
        return value
    return value.astimezone(dt.UTC).replace(tzinfo=None)


@dataclass
class PersonaRows:
    """Rows of one persona, keyed by table."""

    persona_id: str
    tables: dict[str, list[dict]] = field(default_factory=dict)

    def add(self, table: str, row: dict) -> None:
        self.tables.setdefault(table, []).append(row)


def release_rows(release: ReleaseFile, benchmark_name: str, seq: int, source_file: str | None) -> PersonaRows:
    bid = benchmark_id(benchmark_name)
    pid = persona_id(benchmark_name, release.person_id)
    rows = PersonaRows(pid)
    trace_key = {t.id: content_id(pid, "trace", t.id) for t in release.context}
    dates = [_naive_utc(t.event_date) for t in release.context]
    rows.add("personas", {
        "persona_id": pid, "benchmark_id": bid, "person_key": release.person_id, "seq": seq,
        "person_name": release.person_name, "language": None, "big_five": None, "profile": None,
        "narrative": None, "timeline_start": min(dates, default=None), "timeline_end": max(dates, default=None),
        "source_file": source_file,
    })
    for i, t in enumerate(release.context):
        rows.add("traces", {
            "trace_id": trace_key[t.id], "persona_id": pid, "external_id": t.id, "seq": i, "medium": t.medium,
            "event_date": dates[i], "content": t.content, "detailed_event_id": None, "intent": None,
            "audience": None, "key_information": None, "is_noise": False,
        })
    for qi, q in enumerate(release.questions):
        qid = content_id(pid, "question", q.id)
        rows.add("questions", {
            "question_id": qid, "benchmark_id": bid, "persona_id": pid, "external_id": q.id, "seq": qi,
            "question": q.question, "question_type": q.question_type,
            "question_type_known": q.question_type in QUESTION_TYPES, "dimension": q.dimension,
            "dimension_known": q.dimension in DIMENSIONS, "question_time": _naive_utc(q.question_time),
            "answer": q.answer, "correct_choice_id": q.correct_choice_id, "arc_id": None, "segment_id": None,
            "plan": None,
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
    return rows


# -- import ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ImportSummary:
    benchmark_id: str
    name: str
    personas: int
    traces: int
    questions: int
    free_text_only: int
    unknown_question_types: dict[str, int]
    evidence_without_traces: int


def load_releases(wh: Warehouse, releases: Sequence[tuple[str, ReleaseFile]], name: str) -> ImportSummary:
    """Write parsed release files as benchmark ``name`` in one transaction (replacing those personas)."""
    problems = []
    seen: dict[str, str] = {}
    for file, rel in releases:
        if rel.person_id in seen:
            problems.append(Problem(file, "$.person_id", f"person {rel.person_id!r} is also in {seen[rel.person_id]}"))
        seen[rel.person_id] = file
    if problems:
        raise ReleaseError(problems)
    bid = benchmark_id(name)
    existing = wh.rows("SELECT source FROM benchmarks WHERE benchmark_id = ?", [bid])
    if existing and existing[0][0] != "imported":
        raise ReleaseError([Problem(name, "$", f"benchmark {name!r} exists and was {existing[0][0]}; "
                                               "import under another --name")])
    first_seq = wh.scalar("SELECT coalesce(max(seq) + 1, 0) FROM personas WHERE benchmark_id = ?", [bid]) or 0
    all_rows = []
    for offset, (file, rel) in enumerate(releases):
        pid = persona_id(name, rel.person_id)
        known_seq = wh.scalar("SELECT seq FROM personas WHERE persona_id = ?", [pid])
        seq = known_seq if known_seq is not None else first_seq + offset
        all_rows.append(release_rows(rel, name, seq, Path(file).name))
    with wh.transaction():
        wh.upsert("benchmarks", [{
            "benchmark_id": bid, "name": name, "source": "imported", "is_offline": False, "language": None,
            "config_json": json.dumps({"files": sorted(Path(f).name for f, _ in releases)}),
            "gate_status": "pending",  # new content: any earlier gate verdict no longer applies
        }])
        for rows in all_rows:
            delete_persona(wh, rows.persona_id)
            for table in PERSONA_TABLES:
                if table in rows.tables:
                    wh.upsert(table, rows.tables[table])
    questions = [q for _, rel in releases for q in rel.questions]
    unknown: dict[str, int] = {}
    for q in questions:
        if q.question_type not in QUESTION_TYPES:
            unknown[q.question_type] = unknown.get(q.question_type, 0) + 1
    return ImportSummary(
        benchmark_id=bid, name=name, personas=len(releases),
        traces=sum(len(rel.context) for _, rel in releases), questions=len(questions),
        free_text_only=sum(1 for q in questions if not q.choices),
        unknown_question_types=unknown,
        evidence_without_traces=sum(1 for q in questions for e in q.evidence if not e.digital_trace_ids),
    )


def import_release_files(wh: Warehouse, paths: Sequence[str | Path], name: str) -> ImportSummary:
    """Parse every file first (collecting all problems), then load them all or nothing."""
    parsed, problems = [], []
    for path in paths:
        try:
            parsed.append((str(path), parse_release_file(path)))
        except ReleaseError as exc:
            problems.extend(exc.problems)
    if problems:
        raise ReleaseError(problems)
    return load_releases(wh, parsed, name)


# -- export ------------------------------------------------------------------------------------


class UnknownBenchmark(LookupError):
    pass


def resolve_benchmark(wh: Warehouse, ref: str) -> tuple[str, str]:
    """(id, name) of a benchmark given its id or its name."""
    got = wh.rows("SELECT benchmark_id, name FROM benchmarks WHERE benchmark_id = ? OR name = ?", [ref, ref])
    if not got:
        names = [r[0] for r in wh.rows("SELECT name FROM benchmarks ORDER BY name")]
        raise UnknownBenchmark(f"no benchmark {ref!r} in {wh.path} (known: {', '.join(names) or 'none'})")
    return got[0]


def _iso(value: dt.datetime) -> str:
    return value.isoformat()


def export_persona(wh: Warehouse, pid: str) -> dict:
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
    for (qid, ext, question, qtype, qtime, answer, dim, correct) in wh.rows(
        "SELECT question_id, external_id, question, question_type, question_time, answer, dimension, "
        "correct_choice_id FROM questions WHERE persona_id = ? ORDER BY seq, external_id", [pid]):
        questions.append({
            "id": ext, "question": question, "question_type": qtype, "question_time": _iso(qtime),
            "answer": answer, "dimension": dim,
            "digital_trace_ids": [ext_of[t] for t in q_traces.get(qid, [])],
            "evidence": [{"statement": e["statement"], "digital_trace_ids": [ext_of[t] for t in e["ids"]]}
                         for e in q_evidence.get(qid, [])],
            "choices": q_choices.get(qid, []),
            "correct_choice_id": correct,
        })
    out: dict = {"person_name": person_name, "person_id": person_key, "context": context, "questions": questions}
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


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def export_release(wh: Warehouse, ref: str, out_dir: str | Path) -> list[Path]:
    """Write one ``<person_id>.json`` per persona of the benchmark; each file appears whole or not at all."""
    bid, _ = resolve_benchmark(wh, ref)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for pid, key in wh.rows("SELECT persona_id, person_key FROM personas WHERE benchmark_id = ? ORDER BY seq", [bid]):
        doc = export_persona(wh, pid)
        target = out / f"{_UNSAFE.sub('_', key) or 'persona'}.json"
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
