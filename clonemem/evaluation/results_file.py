"""Results files in and out: a memory system run elsewhere, scored here like a built-in one.

In: each line's items are the system's retrieval for that question (as a built-in's retrieval at the
largest k); its ``choice`` and ``answer``, when given, replace the answerer's; the judge scores the answer.
Ids are the release's (question ``id``, trace ``context[].id``), mapped here to the warehouse's. A file is
read and checked completely before anything runs: the first problem is reported with the file, line and
JSON path (or id), and nothing is stored.

Out: a stored evaluation's retrieval, choice, answer and write diagnosis for one system and k, in the same
format, so that scoring the file again reproduces every metric of that system and k.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from clonemem.evaluation.diagnosis import Supports, diagnose_read
from clonemem.evaluation.run import GivenAnswer, PersonaData, QuestionRetrieval, Retrieval
from clonemem.memory.base import Retrieved
from clonemem.schemas.results_file import FileLine, ResultsFileError
from clonemem.schemas.versions import FIELD, RESULTS_FILE
from clonemem.warehouse import Warehouse
from clonemem.warehouse.catalog import UnknownBenchmark, resolve_benchmark

# -- reading ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ResultsFile:
    file: str  # as given (messages, provenance)
    sha256: str  # of the file's bytes
    lines: tuple[tuple[int, FileLine], ...]  # (line number, line), blank lines skipped


def _json_path(loc: Sequence[str | int]) -> str:
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc)


def _problem(err: Mapping) -> str:
    if err["type"] == "missing":
        return "required field is missing"
    got = err.get("input")
    shown = (
        type(got).__name__
        if isinstance(got, dict | list)
        else json.dumps(got, ensure_ascii=False, default=str)
    )
    return f"{err['msg']} (got {shown[:57] + '...' if len(shown) > 60 else shown})"


def read_results_file(path: str | Path) -> ResultsFile:
    """Parse and validate every line (JSON, fields, types, choice A–E); the first problem is an error."""
    file = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ResultsFileError(
            f"{file}: cannot read the results file: {exc.strerror or exc}"
        ) from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ResultsFileError(f"{file}: not UTF-8 text (byte {exc.start})") from None
    lines = []
    for n, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ResultsFileError(
                f"{file}: line {n}: not JSON: {exc.msg} (column {exc.colno})"
            ) from None
        if not isinstance(obj, dict):
            raise ResultsFileError(
                f"{file}: line {n}: $: expected a JSON object, got {type(obj).__name__}"
            )
        if (why := RESULTS_FILE.problem(obj.get(FIELD))) is not None:
            raise ResultsFileError(f"{file}: line {n}: $.{FIELD}: {why}")
        try:
            lines.append((n, FileLine.model_validate(obj)))
        except ValidationError as exc:
            err = exc.errors()[0]
            more = len(exc.errors()) - 1
            raise ResultsFileError(
                f"{file}: line {n}: {_json_path(err['loc'])}: {_problem(err)}"
                + (f" (and {more} more problem{'s' * (more > 1)} on this line)" if more else "")
            ) from None
    if not lines:
        raise ResultsFileError(f"{file}: no lines (one JSON object per question expected)")
    return ResultsFile(file, hashlib.sha256(data).hexdigest(), tuple(lines))


# -- the benchmark's release ids ----------------------------------------------------------------------


@dataclass(frozen=True)
class QuestionRef:
    question_id: str  # warehouse id
    persona_id: str
    person_key: str  # the release's person_id
    language: str | None
    has_choices: bool


@dataclass(frozen=True)
class BenchmarkIds:
    """How the release ids of one benchmark map to the warehouse's."""

    questions: Mapping[
        str, tuple[QuestionRef, ...]
    ]  # release question id -> its question(s), benchmark order
    traces: Mapping[str, Mapping[str, str]]  # persona id -> release trace id -> trace id
    external: Mapping[str, str]  # trace id -> release trace id

    def ambiguous(self, release_qid: str) -> bool:
        return len(self.questions.get(release_qid, ())) > 1


def benchmark_ids(wh: Warehouse, benchmark_id: str) -> BenchmarkIds:
    questions: dict[str, list[QuestionRef]] = {}
    for qid, ext, pid, key, lang, has_choices in wh.rows(
        "SELECT q.question_id, q.external_id, q.persona_id, p.person_key, p.language, "
        "       EXISTS (SELECT 1 FROM question_choices c WHERE c.question_id = q.question_id) "
        "FROM questions q JOIN personas p USING (persona_id) WHERE p.benchmark_id = ? ORDER BY p.seq, q.seq",
        [benchmark_id],
    ):
        questions.setdefault(ext, []).append(QuestionRef(qid, pid, key, lang, bool(has_choices)))
    traces: dict[str, dict[str, str]] = {}
    external = {}
    for tid, ext, pid in wh.rows(
        "SELECT t.trace_id, t.external_id, t.persona_id FROM traces t "
        "JOIN personas p USING (persona_id) WHERE p.benchmark_id = ?",
        [benchmark_id],
    ):
        traces.setdefault(pid, {})[ext] = tid
        external[tid] = ext
    return BenchmarkIds({k: tuple(v) for k, v in questions.items()}, traces, external)


# -- resolving a file against a benchmark -------------------------------------------------------------


@dataclass(frozen=True)
class FileRetrieval:
    """One question's line, in warehouse ids."""

    items: tuple[Retrieved, ...] = ()
    given: GivenAnswer = GivenAnswer()
    written: bool | None = None


@dataclass(frozen=True)
class ResolvedFile:
    file: str
    sha256: str
    lines: int
    by_persona: Mapping[str, Mapping[str, FileRetrieval]]  # persona id -> question id -> its line
    missing: tuple[str, ...] = ()  # release ids of the benchmark's questions without a line
    max_items: int = 0
    gives_answers: bool = False  # some line has a choice or an answer
    provenance: Mapping[str, str] = field(default_factory=dict)


def _question(ids: BenchmarkIds, file: str, n: int, line: FileLine) -> QuestionRef:
    found = ids.questions.get(line.question_id, ())
    if not found:
        raise ResultsFileError(
            f"{file}: line {n}: unknown question id {line.question_id!r} (not in this benchmark)"
        )
    chosen = [
        q
        for q in found
        if (line.person_id is None or q.person_key == line.person_id)
        and (line.language is None or q.language == line.language)
    ]
    if not chosen:
        raise ResultsFileError(
            f"{file}: line {n}: question id {line.question_id!r} is not in the persona named by "
            f"person_id {line.person_id!r}, language {line.language!r}"
        )
    if len(chosen) > 1:
        where = ", ".join(f"{q.person_key} ({q.language or '?'})" for q in chosen)
        raise ResultsFileError(
            f"{file}: line {n}: question id {line.question_id!r} is in several personas ({where}): "
            'add "person_id" (and "language") to the line'
        )
    return chosen[0]


def resolve(rf: ResultsFile, ids: BenchmarkIds, allow_missing: bool = False) -> ResolvedFile:
    """Map every line to the benchmark's questions and traces; unknown or repeated ids are errors, and so
    are questions without a line unless ``allow_missing`` (they then retrieve nothing)."""
    by_persona: dict[str, dict[str, FileRetrieval]] = {}
    seen: dict[str, int] = {}
    for n, line in rf.lines:
        q = _question(ids, rf.file, n, line)
        if q.question_id in seen:
            raise ResultsFileError(
                f"{rf.file}: line {n}: question id {line.question_id!r} again (first on line "
                f"{seen[q.question_id]})"
            )
        seen[q.question_id] = n
        if line.choice is not None and not q.has_choices:
            raise ResultsFileError(
                f"{rf.file}: line {n}: $.choice: question {line.question_id!r} has no choices "
                '(free-text only); leave "choice" out'
            )
        known = ids.traces.get(q.persona_id, {})
        items = []
        for i, item in enumerate(line.items):
            for j, ext in enumerate(item.trace_ids):
                if ext not in known:
                    raise ResultsFileError(
                        f"{rf.file}: line {n}: $.items[{i}].trace_ids[{j}]: unknown trace id {ext!r} "
                        f"(not in the persona {q.person_key!r} of question {line.question_id!r})"
                    )
            items.append(
                Retrieved(item.text, tuple(known[e] for e in item.trace_ids), kind=item.kind)
            )
        by_persona.setdefault(q.persona_id, {})[q.question_id] = FileRetrieval(
            tuple(items), GivenAnswer(line.choice, line.answer), line.written
        )
    missing = tuple(
        ext for ext, refs in ids.questions.items() for q in refs if q.question_id not in seen
    )
    if missing and not allow_missing:
        total = sum(len(refs) for refs in ids.questions.values())
        raise ResultsFileError(
            f"{rf.file}: {len(missing)} of the benchmark's {total} questions have no line (first: "
            f"{missing[0]!r}); add them, or pass --allow-missing to score them as retrieving nothing"
        )
    return ResolvedFile(
        rf.file,
        rf.sha256,
        len(rf.lines),
        by_persona,
        missing,
        max((len(line.items) for _, line in rf.lines), default=0),
        any(line.choice is not None or line.answer is not None for _, line in rf.lines),
        {"file": Path(rf.file).name, "sha256": rf.sha256},
    )


def read_and_resolve(
    wh: Warehouse, benchmark_id: str, path: str | Path, allow_missing: bool
) -> ResolvedFile:
    return resolve(read_results_file(path), benchmark_ids(wh, benchmark_id), allow_missing)


def file_ks(resolved: ResolvedFile, ks: Sequence[int] | None) -> list[int]:
    """The k values to score: given, or the most items on any line. A file that gives choices or answers
    made them from one context, so it is scored at one k."""
    chosen = sorted(set(ks)) if ks else [max(1, resolved.max_items)]
    if resolved.gives_answers and len(chosen) > 1:
        raise ResultsFileError(
            f"{resolved.file}: its lines give choices or answers, which were made from one "
            f"context: score it at one k (got --k {','.join(map(str, chosen))})"
        )
    return chosen


# -- scoring -----------------------------------------------------------------------------------------


def file_retrieval(
    system: str, persona: PersonaData, lines: Mapping[str, FileRetrieval], supports: Supports | None
) -> Retrieval:
    """The persona's retrieval as the file gives it (a question without a line retrieved nothing), and
    each question's read diagnosis from those items."""
    # built and run elsewhere: its build time and LLM spend are not known here (blank, not 0)
    out = Retrieval(
        system, persona.persona_id, build_seconds=None, llm_calls=None, llm_tokens=None, items=0
    )
    for q in persona.questions:
        line = lines.get(q.question_id, FileRetrieval())
        out.results[q.question_id] = QuestionRetrieval(
            tuple(i.text for i in line.items), tuple(i.trace_ids for i in line.items), None
        )
        out.kinds[q.question_id] = tuple(i.kind for i in line.items)
        if supports is not None:
            out.diagnosis[q.question_id] = diagnose_read(
                list(zip(q.statements, q.evidence_sets)), line.items, supports, line.written
            )
    # the write step of a line that does not say is blank, with or without evidence (else a benchmark with
    # questions lacking evidence showed 0.000 where one without such questions showed blank)
    out.write_unknown = frozenset(
        q.question_id
        for q in persona.questions
        if lines.get(q.question_id, FileRetrieval()).written is None
    )
    return out


def given_answers(lines: Mapping[str, FileRetrieval]) -> dict[str, GivenAnswer]:
    return {qid: line.given for qid, line in lines.items() if line.given != GivenAnswer()}


# -- writing -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExportedRetrievals:
    path: Path
    eval_run_id: str
    system: str
    k: int
    lines: int


def _one(options: Sequence, what: str, given: object, flag: str, eval_run_id: str) -> object:
    if given is not None:
        if given not in options:
            raise ResultsFileError(
                f"evaluation run {eval_run_id} has no {what} {given!r} (it has: "
                f"{', '.join(map(str, options))})"
            )
        return given
    if len(options) != 1:
        raise ResultsFileError(
            f"evaluation run {eval_run_id} scored several {what}s ({', '.join(map(str, options))}): "
            f"choose one with {flag}"
        )
    return options[0]


def _eval_run(wh: Warehouse, ref: str) -> tuple[str, str, dict]:
    """(eval run id, benchmark id, config) of an evaluation run id, or of a benchmark's latest evaluation."""
    got = wh.rows(
        "SELECT eval_run_id, benchmark_id, config_json::VARCHAR FROM eval_runs WHERE eval_run_id = ?",
        [ref],
    )
    if not got:
        try:
            bid, _ = resolve_benchmark(wh, ref)
        except UnknownBenchmark:
            raise ResultsFileError(f"no evaluation run or benchmark {ref!r} in {wh.path}") from None
        got = wh.rows(
            "SELECT eval_run_id, benchmark_id, config_json::VARCHAR FROM eval_runs WHERE benchmark_id = ? "
            "ORDER BY started_at DESC LIMIT 1",
            [bid],
        )
        if not got:
            raise ResultsFileError(f"benchmark {ref!r} has no evaluation run yet")
    eid, bid, config = got[0]
    return eid, bid, json.loads(config or "{}")


def _written(write_failure: float | None) -> bool | None:
    """The write diagnosis a stored question score implies; unknown when its write step was not decided
    (the system lists no stored memory, the answer went unscored, or a file did not say)."""
    return None if write_failure is None else write_failure != 1.0


def retrieval_lines(
    wh: Warehouse, ref: str, system: str | None = None, k: int | None = None
) -> tuple[str, str, int, list[dict]]:
    """(eval run id, system, k, lines) of a stored evaluation in the results-file format."""
    eid, bid, config = _eval_run(wh, ref)
    system = str(_one(config.get("systems", []), "system", system, "--system", eid))
    k = int(_one(config.get("k", []), "k", k, "--k", eid))  # type: ignore[call-overload]  # _one returns the stored JSON value, an int here
    ids = benchmark_ids(wh, bid)
    stored = {
        qid: (items, choice, answer, wf)
        for qid, items, choice, answer, wf in wh.rows(
            "SELECT r.question_id, r.items::VARCHAR, a.predicted_choice_id, a.answer_text, s.write_failure "
            "FROM eval_retrievals r "
            "LEFT JOIN eval_answers a ON a.eval_run_id = r.eval_run_id AND a.system = r.system AND a.k = ? "
            "     AND a.question_id = r.question_id "
            "LEFT JOIN eval_question_scores s ON s.eval_run_id = r.eval_run_id AND s.system = r.system AND s.k = ? "
            "     AND s.question_id = r.question_id "
            "WHERE r.eval_run_id = ? AND r.system = ?",
            [k, k, eid, system],
        )
    }
    lines = []
    for ext, refs in ids.questions.items():
        for q in refs:
            if q.question_id not in stored:
                continue
            items, choice, answer, write_failure = stored[q.question_id]
            if items is None:
                raise ResultsFileError(
                    f"evaluation run {eid} was stored before retrieved items were kept: evaluate "
                    f"{system!r} again to export its retrievals"
                )
            line: dict = {"question_id": ext}
            if ids.ambiguous(ext):
                line.update(person_id=q.person_key, language=q.language)
            line["items"] = [
                {
                    "trace_ids": [ids.external[t] for t in item["trace_ids"]],
                    "text": item["text"],
                    "kind": item["kind"],
                }
                for item in json.loads(items)
            ]
            if choice is not None:
                line["choice"] = choice
            if answer is not None:
                line["answer"] = answer
            if (written := _written(write_failure)) is not None:
                line["written"] = written
            lines.append(line)
    return eid, system, k, lines


def export_retrievals(
    wh: Warehouse, ref: str, out: str | Path, system: str | None = None, k: int | None = None
) -> ExportedRetrievals:
    """Write one system's retrievals, choices and answers at one k of a stored evaluation (atomically)."""
    eid, system, k, lines = retrieval_lines(wh, ref, system, k)
    target = Path(out)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".export-", suffix=".jsonl")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            for line in lines:
                fh.write(
                    json.dumps({FIELD: RESULTS_FILE.version, **line}, ensure_ascii=False) + "\n"
                )
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return ExportedRetrievals(target, eid, system, k, len(lines))
