"""What the protocols read of a benchmark: which protocols its importer declares, each question as
the protocols see it (the source's ids, type labels and LoCoMo category, the evidence turns) and
each trace's session and date (LongMemEval's session ids and ``haystack_dates``)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from clonemem.evaluation.protocols import PROTOCOLS, Scope, protocol, selected
from clonemem.evaluation.protocols.base import Protocol, ProtocolQuestion
from clonemem.importers import IMPORTERS
from clonemem.registry import RegistryError
from clonemem.warehouse import Warehouse


@dataclass(frozen=True)
class ProtocolData:
    """The protocols an evaluation computes and what they read of the benchmark."""

    names: tuple[str, ...]
    questions: dict[str, ProtocolQuestion] = field(default_factory=dict)  # by warehouse question id
    scopes: dict[str, Scope] = field(default_factory=dict)  # by persona id
    dates: dict[str, dt.datetime] = field(default_factory=dict)  # trace id -> its session's date

    def for_persona(self, persona_id: str) -> ProtocolData:
        """The part one persona's tasks read (their cache keys hash it: the whole benchmark would
        cost)."""
        questions = {qid: q for qid, q in self.questions.items() if q.persona_id == persona_id}
        scope = self.scopes.get(persona_id, Scope({}))
        return ProtocolData(
            self.names,
            questions,
            {persona_id: scope},
            {t: self.dates[t] for t in scope.session_of if t in self.dates},
        )

    @property
    def protocols(self) -> list[Protocol]:
        return [protocol(n) for n in self.names]

    @property
    def ranks(self) -> bool:
        """Some protocol scores the retrieval's ranking (as deep as ``ranking_depth``)."""
        return any(p.ranks for p in self.protocols)

    @property
    def answers(self) -> bool:
        """Some protocol needs its own answerer (or a judge)."""
        return any(p.answer_style or p.judge for p in self.protocols)


def declared_protocols(wh: Warehouse, benchmark_id: str) -> tuple[str, ...]:
    """The protocols the importers of the benchmark's source formats declare (none for a generated
    benchmark), in the importers' order."""
    config = wh.scalar(
        "SELECT config_json::VARCHAR FROM benchmarks WHERE benchmark_id = ?", [benchmark_id]
    )
    doc = json.loads(config) if config else {}
    formats = set(doc.get("formats", [])) | (
        {doc["source_format"]} if doc.get("source_format") else set()
    )
    out: list[str] = []
    for name in IMPORTERS.names():
        try:
            importer = IMPORTERS.get(name)
        except RegistryError:  # a plugin importer that cannot load declares nothing here
            continue
        if getattr(importer, "source_format", None) in formats:
            out += [p for p in getattr(importer, "protocols", ()) if p not in out]
    return tuple(out)


def _category(value: object) -> int | None:
    """LoCoMo's category ('1'..'5' since migration 0023; an integer before); None for others."""
    text = str(value).strip() if value is not None else ""
    return int(text) if text.isdigit() else None


def load_protocol_data(
    wh: Warehouse, benchmark_id: str, configured: Sequence[str] | None
) -> ProtocolData:
    """The selected protocols (the importer's, adjusted by ``[evaluation] protocols``) and, when
    any, the benchmark's questions and traces as they read them."""
    names = selected(declared_protocols(wh, benchmark_id), configured)
    if not names:
        return ProtocolData(names)
    for name in names:
        PROTOCOLS.get(name)
    questions = {}
    for qid, pid, ext, question, answer, stype, category, qtime, correct, evidence in wh.rows(
        "SELECT q.question_id, q.persona_id, q.external_id, q.question, q.answer, "
        " coalesce(q.source_question_type, q.question_type), q.source_category, q.question_time, "
        " q.correct_choice_id, "
        " coalesce((SELECT list(DISTINCT et.trace_id) FROM question_evidence qe "
        "  JOIN evidence_traces et USING (evidence_id) WHERE qe.question_id = q.question_id), []) "
        "FROM questions q WHERE q.benchmark_id = ? ORDER BY q.persona_id, q.seq",
        [benchmark_id],
    ):
        questions[qid] = ProtocolQuestion(
            qid,
            pid,
            ext or qid,
            question,
            answer or "",
            stype or "",
            _category(category),
            qtime,
            frozenset(evidence),
            correct,
        )
    sessions: dict[str, dict[str, str]] = {}
    dates = {}
    for tid, pid, session, when in wh.rows(
        "SELECT t.trace_id, t.persona_id, coalesce(t.session_key, t.trace_id), "
        " coalesce(t.session_date, t.event_date) FROM traces t JOIN personas p USING (persona_id) "
        "WHERE p.benchmark_id = ?",
        [benchmark_id],
    ):
        sessions.setdefault(pid, {})[tid] = session
        if when is not None:
            dates[tid] = when
    pids = {q.persona_id for q in questions.values()}
    return ProtocolData(
        names, questions, {pid: Scope(sessions.get(pid, {})) for pid in pids}, dates
    )


def longmemeval_date(value: dt.datetime) -> str:
    """LongMemEval's date form, e.g. ``2023/05/20 (Sat) 02:21``."""
    return value.strftime("%Y/%m/%d (%a) %H:%M")


def locomo_date(value: dt.datetime) -> str:
    """LoCoMo's answer form of a date, e.g. ``7 May 2023``."""
    return f"{value.day} {value.strftime('%B %Y')}"
