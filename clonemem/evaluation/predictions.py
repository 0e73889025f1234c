"""Predictions made by another harness, in the benchmarks' own layouts, read as a results file.

- ``longmemeval``: what LongMemEval's ``evaluate_qa.py`` reads, JSONL lines (or one JSON list) of
  ``{"question_id", "hypothesis"}``, optionally with the retrieval log of its ``run_retrieval.py``:
  ``retrieval_results.ranked_items[].corpus_id`` in rank order (turn ids ``{session_id}_{n}``, also
  as LongMemEval renames them ``noans_…``, or session ids, which stand for their turns in order);
- ``locomo``: the LoCoMo layout (``locomo10.json``'s list of samples, or one sample) whose qa items
  carry a prediction under a named key (``--key``, e.g. ``gpt-4_prediction``) and optionally
  ``<key>_context``, the dia_ids it retrieved (``D1:3``) or sessions (``S1``);
- ``jsonl``: the project's results-file format (``answer`` per line).

Everything is read and mapped to the benchmark's ids before anything runs; the first problem
(unknown question or trace id, a missing prediction without ``allow_missing``, a malformed line) is
one error naming the file, the line (JSONL) or JSON path, and the field.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from clonemem.evaluation.results_file import (
    BenchmarkIds,
    FileRetrieval,
    QuestionRef,
    ResolvedFile,
    benchmark_ids,
    read_and_resolve,
)
from clonemem.evaluation.run import GivenAnswer
from clonemem.importers.locomo import canonical_turn_id
from clonemem.memory.base import Retrieved
from clonemem.schemas.results_file import ResultsFileError
from clonemem.warehouse import Warehouse

Format = Literal["longmemeval", "locomo", "jsonl"]
FORMATS: tuple[str, ...] = ("longmemeval", "locomo", "jsonl")

_TURN = re.compile(r"^(?P<session>.+)_(?P<n>\d+)$")
_DIA = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)", re.IGNORECASE)
_SESSION = re.compile(r"^S\s*(\d+)$", re.IGNORECASE)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True, frozen=True)


class RankedItem(_Strict):
    corpus_id: str = Field(min_length=1)


class RetrievalLog(_Strict):
    ranked_items: list[RankedItem]


class LongMemEvalLine(_Strict):
    """One line of a LongMemEval hypothesis file."""

    question_id: str = Field(min_length=1)
    hypothesis: str
    retrieval_results: RetrievalLog | None = None


@dataclass(frozen=True)
class FilePrediction:
    """One question's prediction as read: where it was, its answer and its ranking in the file's
    ids."""

    where: str  # "line 3" or a JSON path
    question_id: str  # the file's question id (the benchmark's external id)
    answer: str
    ranked: tuple[tuple[str, str], ...] = ()  # (the file's id, where it is) in rank order


@dataclass(frozen=True)
class _Scope:
    """One persona's traces by external id, their sessions and texts."""

    traces: Mapping[str, str]  # external id -> trace id
    sessions: Mapping[str, tuple[str, ...]]  # session key -> its trace ids in order
    text: Mapping[str, str]  # trace id -> content


def read_predictions(
    wh: Warehouse,
    benchmark_id: str,
    path: str | Path,
    fmt: str,
    key: str | None = None,
    allow_missing: bool = False,
) -> ResolvedFile:
    """The predictions file mapped to the benchmark, as a results file (each prediction the given
    answer of its question, its ranking the retrieved items)."""
    if fmt not in FORMATS:
        raise ResultsFileError(
            f"{path}: unknown predictions format {fmt!r} (known: {', '.join(FORMATS)})"
        )
    if fmt == "jsonl":
        return read_and_resolve(wh, benchmark_id, path, allow_missing)
    file = str(path)
    data = _read(file)
    if fmt == "longmemeval":
        predictions = list(_longmemeval(file, data))
    else:
        if not key:
            raise ResultsFileError(
                f"{file}: the locomo format needs --key, the qa items' prediction field "
                "(e.g. gpt-4_prediction)"
            )
        predictions = list(_locomo(file, data, key, allow_missing))
    return _resolve(
        wh, benchmark_id, file, hashlib.sha256(data).hexdigest(), predictions, allow_missing
    )


def _read(file: str) -> bytes:
    try:
        return Path(file).read_bytes()
    except OSError as exc:
        raise ResultsFileError(
            f"{file}: cannot read the predictions file: {exc.strerror or exc}"
        ) from None


def _text(file: str, data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ResultsFileError(f"{file}: not UTF-8 text (byte {exc.start})") from None


def _field(loc: Sequence[str | int]) -> str:
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc)


def _invalid(file: str, where: str, exc: ValidationError) -> ResultsFileError:
    err = exc.errors()[0]
    problem = "required field is missing" if err["type"] == "missing" else err["msg"]
    return ResultsFileError(f"{file}: {where}: {_field(err['loc'])}: {problem}")


def _longmemeval(file: str, data: bytes) -> Iterator[FilePrediction]:
    text = _text(file, data)
    stripped = text.lstrip()
    if stripped.startswith("["):  # LongMemEval's script also reads one JSON list
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ResultsFileError(
                f"{file}: line {exc.lineno}: not JSON: {exc.msg} (column {exc.colno})"
            ) from None
        entries: list[tuple[str, Any]] = [(f"$[{i}]", obj) for i, obj in enumerate(doc)]
    else:
        entries = []
        for n, raw in enumerate(text.splitlines(), 1):
            if not raw.strip():
                continue
            try:
                entries.append((f"line {n}", json.loads(raw)))
            except json.JSONDecodeError as exc:
                raise ResultsFileError(
                    f"{file}: line {n}: not JSON: {exc.msg} (column {exc.colno})"
                ) from None
    if not entries:
        raise ResultsFileError(f"{file}: no predictions (one JSON object per question expected)")
    for where, obj in entries:
        if not isinstance(obj, dict):
            raise ResultsFileError(
                f"{file}: {where}: $: expected a JSON object, got {type(obj).__name__}"
            )
        try:
            line = LongMemEvalLine.model_validate(obj)
        except ValidationError as exc:
            raise _invalid(file, where, exc) from None
        ranked = (
            ()
            if line.retrieval_results is None
            else tuple(
                (item.corpus_id, f"$.retrieval_results.ranked_items[{i}].corpus_id")
                for i, item in enumerate(line.retrieval_results.ranked_items)
            )
        )
        yield FilePrediction(where, line.question_id, line.hypothesis, ranked)


def _locomo(file: str, data: bytes, key: str, allow_missing: bool) -> Iterator[FilePrediction]:
    try:
        doc = json.loads(_text(file, data))
    except json.JSONDecodeError as exc:
        raise ResultsFileError(
            f"{file}: line {exc.lineno}: not JSON: {exc.msg} (column {exc.colno})"
        ) from None
    samples = [(f"$[{i}]", s) for i, s in enumerate(doc)] if isinstance(doc, list) else [("$", doc)]
    for at, sample in samples:
        if not isinstance(sample, dict) or not isinstance(sample.get("qa"), list):
            raise ResultsFileError(f"{file}: {at}: a LoCoMo sample is an object with a `qa` list")
        sample_id = str(sample.get("sample_id") or "").strip()
        if not sample_id:
            raise ResultsFileError(f"{file}: {at}.sample_id: required field is missing")
        for qi, item in enumerate(sample["qa"]):
            where = f"{at}.qa[{qi}]"
            if not isinstance(item, dict):
                raise ResultsFileError(
                    f"{file}: {where}: expected a JSON object, got {type(item).__name__}"
                )
            if key not in item:
                if allow_missing:
                    continue
                raise ResultsFileError(
                    f"{file}: {where}.{key}: missing prediction (pass --allow-missing to leave "
                    "such questions unscored)"
                )
            answer = item[key]
            if isinstance(answer, bool) or not isinstance(answer, str | int | float):
                raise ResultsFileError(
                    f"{file}: {where}.{key}: a prediction is text (got {type(answer).__name__})"
                )
            context = item.get(f"{key}_context", [])
            if not isinstance(context, list) or not all(isinstance(c, str) for c in context):
                raise ResultsFileError(f"{file}: {where}.{key}_context: a list of dia_ids expected")
            ranked = tuple(
                (_dia(sample_id, c), f"{where}.{key}_context[{ci}]") for ci, c in enumerate(context)
            )
            yield FilePrediction(where, f"{sample_id}:q{qi}", str(answer), ranked)


def _dia(sample_id: str, ref: str) -> str:
    """A LoCoMo context entry as the importer's trace id (``<sample>:D1:3``) or session
    (``<sample>:S1``)."""
    if m := _DIA.fullmatch(ref.strip()):
        return f"{sample_id}:{canonical_turn_id(*m.groups())}"
    if m := _SESSION.fullmatch(ref.strip()):
        return f"{sample_id}:S{int(m.group(1))}"
    return f"{sample_id}:{ref.strip()}"


def _scopes(wh: Warehouse, benchmark_id: str) -> dict[str, _Scope]:
    traces: dict[str, dict[str, str]] = {}
    sessions: dict[str, dict[str, list[str]]] = {}
    text: dict[str, dict[str, str]] = {}
    for tid, ext, pid, content in wh.rows(
        "SELECT t.trace_id, t.external_id, t.persona_id, t.content FROM v_traces t JOIN personas p "
        "USING (persona_id) WHERE p.benchmark_id = ? ORDER BY t.persona_id, t.seq",
        [benchmark_id],
    ):
        traces.setdefault(pid, {})[ext] = tid
        text.setdefault(pid, {})[tid] = content
        for session in _sessions_of(ext):
            sessions.setdefault(pid, {}).setdefault(session, []).append(tid)
    return {
        pid: _Scope(
            traces[pid], {s: tuple(ts) for s, ts in sessions.get(pid, {}).items()}, text[pid]
        )
        for pid in traces
    }


def _sessions_of(external_id: str) -> list[str]:
    """The session ids a trace's external id belongs to: LongMemEval's ``{session}_{n}`` and
    LoCoMo's ``<sample>:D<s>:<n>`` (as ``<sample>:S<s>``)."""
    out = []
    if m := _TURN.match(external_id):
        out.append(m.group("session"))
    if m := re.match(r"^(?P<sample>.+):D(?P<s>\d+):\d+", external_id):
        out.append(f"{m.group('sample')}:S{m.group('s')}")
    return out


def _trace_ids(scope: _Scope, ref: str) -> tuple[str, ...] | None:
    """A ranked id as the persona's trace ids: a turn, a turn LongMemEval renamed, or a whole
    session."""
    for candidate in (ref, ref.replace("noans", "answer")):
        if candidate in scope.traces:
            return (scope.traces[candidate],)
    for candidate in (ref, ref.replace("noans", "answer")):
        if candidate in scope.sessions:
            return scope.sessions[candidate]
    return None


def _question(ids: BenchmarkIds, file: str, p: FilePrediction) -> QuestionRef:
    found = ids.questions.get(p.question_id, ())
    if not found:
        raise ResultsFileError(
            f"{file}: {p.where}: $.question_id: unknown question id {p.question_id!r} "
            "(not in this benchmark)"
        )
    if len(found) > 1:
        raise ResultsFileError(
            f"{file}: {p.where}: $.question_id: question id {p.question_id!r} is in several "
            "personas of this benchmark; score them with the jsonl format (person_id per line)"
        )
    return found[0]


def _resolve(
    wh: Warehouse,
    benchmark_id: str,
    file: str,
    sha256: str,
    predictions: Sequence[FilePrediction],
    allow_missing: bool,
) -> ResolvedFile:
    ids = benchmark_ids(wh, benchmark_id)
    scopes = _scopes(wh, benchmark_id)
    by_persona: dict[str, dict[str, FileRetrieval]] = {}
    seen: dict[str, str] = {}
    for p in predictions:
        q = _question(ids, file, p)
        if q.question_id in seen:
            raise ResultsFileError(
                f"{file}: {p.where}: $.question_id: question id {p.question_id!r} again (first "
                f"at {seen[q.question_id]})"
            )
        seen[q.question_id] = p.where
        scope = scopes.get(q.persona_id, _Scope({}, {}, {}))
        items = []
        for ref, field_at in p.ranked:
            found = _trace_ids(scope, ref)
            if found is None:
                raise ResultsFileError(
                    f"{file}: {p.where}: {field_at}: unknown turn or session id {ref!r} (not in "
                    f"the history of question {p.question_id!r})"
                )
            items += [Retrieved(scope.text[t], (t,), kind="trace") for t in found]
        by_persona.setdefault(q.persona_id, {})[q.question_id] = FileRetrieval(
            tuple(items), GivenAnswer(answer=p.answer), None
        )
    missing = tuple(
        ext for ext, refs in ids.questions.items() for q in refs if q.question_id not in seen
    )
    if missing and not allow_missing:
        total = sum(len(refs) for refs in ids.questions.values())
        raise ResultsFileError(
            f"{file}: {len(missing)} of the benchmark's {total} questions have no prediction "
            f"(first: {missing[0]!r}); add them, or pass --allow-missing to leave them unscored"
        )
    return ResolvedFile(
        file,
        sha256,
        len(predictions),
        by_persona,
        missing,
        max((len(r.items) for lines in by_persona.values() for r in lines.values()), default=0),
        True,
        {"file": Path(file).name, "sha256": sha256},
    )


def ranked_any(resolved: ResolvedFile) -> bool:
    """Whether the file ranks anything (else no protocol scores retrieval)."""
    return any(r.items for lines in resolved.by_persona.values() for r in lines.values())


def given_texts(lines: Mapping[str, FileRetrieval]) -> dict[str, str]:
    """Each question's predicted answer, by question id."""
    return {qid: line.given.answer for qid, line in lines.items() if line.given.answer is not None}
