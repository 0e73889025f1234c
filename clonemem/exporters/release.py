"""Export of a benchmark in the CloneMem release format (the README, "Release format"): one JSON file
per persona, each written atomically. Questions carry the source's labels (``inference``), so an
imported release is reproduced byte for byte; a question with a source category (a LoCoMo import)
also carries ``locomo_category`` (LoCoMo) or ``source_category`` (another source) and ``adversarial_answer``,
a turn of a conversational source its ``session_key``, ``speaker``, ``session_date`` and ``attachments``, a
question its ``evidence_sessions``, and the file the top-level ``source_format``: the release importer
reads them all back.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import tempfile
import unicodedata
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from clonemem import privacy
from clonemem.schemas.release import QUESTION_KEYS
from clonemem.schemas.versions import FIELD, RELEASE
from clonemem.warehouse import Warehouse
from clonemem.warehouse.catalog import resolve_benchmark
from clonemem.warehouse.content import relation_names


def _iso(value: dt.datetime) -> str:
    return value.isoformat()


def export_persona(wh: Warehouse, pid: str, questions_key: str = "questions") -> dict:
    """One persona as a release document; question types as the source labelled them (``inference``)."""
    if questions_key not in QUESTION_KEYS:
        raise ValueError(
            f"questions_key must be one of {', '.join(QUESTION_KEYS)}, got {questions_key!r}"
        )
    (person_key, person_name, bid) = wh.rows(
        "SELECT person_key, person_name, benchmark_id FROM personas WHERE persona_id = ?", [pid]
    )[0]
    # who each trace reached, where known: stored with it, or derived when the persona's relations are known
    # (a generated benchmark); a published file's traces carry none, and re-export without it
    names = relation_names(wh, pid)
    context = [
        {
            "id": ext,
            "medium": medium,
            "event_date": _iso(date),
            "content": content,
            **(
                {"reached": privacy.trace_reach(reached, audience, medium, names)}
                if reached is not None or names
                else {}
            ),
            **_turn_fields(session_key, speaker, session_date, attachments),
        }
        for ext, medium, date, content, audience, reached, session_key, speaker, session_date, attachments in wh.rows(
            "SELECT external_id, medium, event_date, content, audience, reached, session_key, speaker, session_date, "
            "attachments FROM v_traces WHERE persona_id = ? ORDER BY seq, external_id",
            [pid],
        )
    ]
    ext_of = dict(wh.rows("SELECT trace_id, external_id FROM traces WHERE persona_id = ?", [pid]))
    q_traces = _grouped(
        wh.rows(
            "SELECT qt.question_id, qt.trace_id FROM question_traces qt JOIN questions q USING (question_id) "
            "WHERE q.persona_id = ? ORDER BY qt.question_id, qt.seq",
            [pid],
        )
    )
    q_choices = _grouped(
        wh.rows(
            "SELECT c.question_id, {'id': c.choice_id, 'text': c.text} FROM question_choices c "
            "JOIN questions q USING (question_id) WHERE q.persona_id = ? ORDER BY c.question_id, c.seq",
            [pid],
        )
    )
    q_evidence = _grouped(
        wh.rows(
            "SELECT qe.question_id, {'statement': e.statement, 'ids': "
            "  coalesce((SELECT list(et.trace_id ORDER BY et.seq) FROM evidence_traces et "
            "            WHERE et.evidence_id = e.evidence_id), [])} "
            "FROM question_evidence qe JOIN evidence e USING (evidence_id) JOIN questions q USING (question_id) "
            "WHERE q.persona_id = ? ORDER BY qe.question_id, qe.seq",
            [pid],
        )
    )
    privacy_tasks = _privacy_tasks(wh, pid)
    questions = []
    locomo = "locomo" in _formats(wh, bid)
    for qid, ext, question, qtype, qtime, answer, dim, correct, category, trap, sessions in wh.rows(
        "SELECT question_id, external_id, question, coalesce(source_question_type, question_type), question_time, "
        "answer, dimension, correct_choice_id, source_category, adversarial_answer, evidence_sessions::VARCHAR "
        "FROM questions WHERE persona_id = ? ORDER BY seq, external_id",
        [pid],
    ):
        item = {
            "id": ext,
            "question": question,
            "question_type": qtype,
            "question_time": _iso(qtime),
            "answer": answer,
            "dimension": dim,
            "digital_trace_ids": [ext_of[t] for t in q_traces.get(qid, [])],
            "evidence": [
                {"statement": e["statement"], "digital_trace_ids": [ext_of[t] for t in e["ids"]]}
                for e in q_evidence.get(qid, [])
            ],
            "choices": q_choices.get(qid, []),
            "correct_choice_id": correct,
        }
        # extra fields (other readers ignore them): an import from another format survives export
        if category is not None and locomo and category.isdigit():
            item["locomo_category"] = int(category)
        elif category is not None:
            item["source_category"] = category
        if trap is not None:
            item["adversarial_answer"] = trap
        if sessions is not None:
            item["evidence_sessions"] = json.loads(sessions)
        if qid in privacy_tasks:  # a privacy task: its boundary, over the positions of its evidence
            item["privacy"] = privacy_tasks[qid]
        questions.append(item)
    out: dict = {
        FIELD: RELEASE.version,
        "person_name": person_name,
        "person_id": person_key,
        "context": context,
        questions_key: questions,
    }
    source, offline = wh.rows(
        "SELECT source, is_offline FROM benchmarks WHERE benchmark_id = ?", [bid]
    )[0]
    formats = _formats(wh, bid)
    if source == "imported" and len(formats) == 1 and formats[0] != "clonemem":
        # Extra top-level field: the source format, read back by the release importer, so the copy keeps
        # its question-type mapping and the standard protocols its format is scored by.
        out["source_format"] = formats[0]
    if source == "generated":
        # Extra top-level field (importers ignore unknown fields): provenance, and the offline label.
        out["generated_by"] = {"pipeline": "clonemem", "offline": bool(offline)}
    return out


def _formats(wh: Warehouse, bid: str) -> list[str]:
    config = wh.scalar("SELECT config_json::VARCHAR FROM benchmarks WHERE benchmark_id = ?", [bid])
    return list((json.loads(config) if config else {}).get("formats", []))


def _turn_fields(
    session_key: str | None,
    speaker: str | None,
    session_date: dt.datetime | None,
    attachments: str | None,
) -> dict:
    """What a conversational source said of a turn, where stored (a published CloneMem file has none)."""
    out: dict = {}
    if session_key is not None:
        out["session_key"] = session_key
    if speaker is not None:
        out["speaker"] = speaker
    if session_date is not None:
        out["session_date"] = _iso(session_date)
    if attachments is not None:
        out["attachments"] = json.loads(attachments)
    return out


def _privacy_tasks(wh: Warehouse, pid: str) -> dict[str, dict]:
    """Per privacy task of the persona: recipient, purpose, tactic, and its necessary and sensitive items as
    positions in the question's evidence list, with whom their traces reached and (sensitive ones) the
    categories of their matters and who may know them all."""
    tasks = {
        qid: {"recipient": r, "purpose": p, "tactic": t, "necessary": [], "sensitive": []}
        for qid, r, p, t in wh.rows(
            "SELECT pi.question_id, pi.recipient, pi.purpose, pi.tactic FROM privacy_items pi "
            "JOIN questions q USING (question_id) WHERE q.persona_id = ?",
            [pid],
        )
    }
    for qid, role, position, disclosed, categories, may_know in wh.rows(
        "SELECT e.question_id, e.role, (SELECT qe.seq FROM question_evidence qe WHERE qe.question_id = e.question_id "
        "  AND qe.evidence_id = e.evidence_id), coalesce(ep.disclosed_to::VARCHAR, '[]'), "
        " coalesce((SELECT list(DISTINCT m.category ORDER BY m.category) FROM privacy_matters m "
        "  WHERE list_contains(json_extract_string(ep.matter_ids, '$[*]'), m.matter_id)), []), "
        " (SELECT list(m.may_know::VARCHAR) FROM privacy_matters m "
        "  WHERE list_contains(json_extract_string(ep.matter_ids, '$[*]'), m.matter_id)) "
        "FROM privacy_item_evidence e JOIN questions q USING (question_id) "
        "LEFT JOIN evidence_privacy ep ON ep.evidence_id = e.evidence_id "
        "WHERE q.persona_id = ? ORDER BY e.question_id, e.role, e.seq",
        [pid],
    ):
        side: dict = {"evidence": position, "disclosed_to": json.loads(disclosed)}
        if role == "sensitive":
            allowed = [set(json.loads(m)) for m in may_know or []]
            side |= {
                "categories": list(categories),
                "may_know": sorted(set.intersection(*allowed)) if allowed else [],
            }
        tasks[qid][role].append(side)
    return tasks


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


def export_release(
    wh: Warehouse, ref: str, out_dir: str | Path, questions_key: str = "questions"
) -> list[Path]:
    """Write one file per persona of the benchmark; each file appears whole or not at all."""
    bid, _ = resolve_benchmark(wh, ref)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = wh.rows(
        "SELECT persona_id, person_key, language, source_file FROM personas WHERE benchmark_id = ? "
        "ORDER BY seq",
        [bid],
    )
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
