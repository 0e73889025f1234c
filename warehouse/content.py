"""A persona's content: the rows every source lands (generation, QA, imports), which tables hold
them, and how to remove them (for re-imports and re-landing)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from clonemem.warehouse.db import Warehouse


@dataclass
class PersonaRows:
    """Rows of one persona, keyed by table: what a generator, the QA stage or an importer lands."""

    persona_id: str
    tables: dict[str, list[dict]] = field(default_factory=dict)

    def add(self, table: str, row: dict) -> None:
        self.tables.setdefault(table, []).append(row)


# Content tables in landing order.
PERSONA_TABLES: tuple[str, ...] = (
    "personas",
    "relations",
    "event_seeds",
    "life_arcs",
    "arc_anchor_states",
    "major_events",
    "major_event_arcs",
    "snapshots",
    "phases",
    "detailed_events",
    "evidence",
    "evidence_arcs",
    "traces",
    "evidence_traces",
    "privacy_matters",
    "evidence_privacy",
    "trajectory_segments",
    "questions",
    "question_evidence",
    "question_traces",
    "question_choices",
    "qa_checks",
    "qa_distractor_rounds",
    "qa_rejected",
    "privacy_items",
    "privacy_item_evidence",
)

# A persona's stage-IV output: what re-landing QA replaces.
QA_TABLES: tuple[str, ...] = (
    "trajectory_segments",
    "questions",
    "question_evidence",
    "question_traces",
    "question_choices",
    "qa_checks",
    "qa_distractor_rounds",
    "qa_rejected",
    "privacy_items",
    "privacy_item_evidence",
)

# Children first; each statement takes the persona id once per `?`.
# A persona's stage-IV output (questions and their quality-control records), replaced on re-landing QA.
_DELETE_QA = (
    "DELETE FROM privacy_item_evidence WHERE question_id IN (SELECT question_id FROM questions WHERE persona_id = ?)",
    "DELETE FROM privacy_items WHERE question_id IN (SELECT question_id FROM questions WHERE persona_id = ?)",
    "DELETE FROM question_choices WHERE question_id IN (SELECT question_id FROM questions WHERE persona_id = ?)",
    "DELETE FROM question_traces WHERE question_id IN (SELECT question_id FROM questions WHERE persona_id = ?)",
    "DELETE FROM question_evidence WHERE question_id IN (SELECT question_id FROM questions WHERE persona_id = ?)",
    "DELETE FROM qa_checks WHERE question_id IN (SELECT question_id FROM questions WHERE persona_id = ?"
    " UNION ALL SELECT question_id FROM qa_rejected WHERE persona_id = ?)",
    "DELETE FROM qa_distractor_rounds WHERE question_id IN (SELECT question_id FROM questions WHERE persona_id = ?"
    " UNION ALL SELECT question_id FROM qa_rejected WHERE persona_id = ?)",
    "DELETE FROM qa_rejected WHERE persona_id = ?",
    "DELETE FROM questions WHERE persona_id = ?",
    "DELETE FROM trajectory_segments WHERE persona_id = ?",
)

_DELETE_PERSONA = _DELETE_QA + (
    "DELETE FROM import_notes WHERE persona_id = ?",
    "DELETE FROM evidence_privacy WHERE persona_id = ?",
    "DELETE FROM privacy_matters WHERE persona_id = ?",
    "DELETE FROM evidence_traces WHERE evidence_id IN (SELECT evidence_id FROM evidence WHERE persona_id = ?)",
    "DELETE FROM evidence_arcs WHERE evidence_id IN (SELECT evidence_id FROM evidence WHERE persona_id = ?)",
    "DELETE FROM evidence WHERE persona_id = ?",
    "DELETE FROM traces WHERE persona_id = ?",
    "DELETE FROM detailed_events WHERE phase_id IN (SELECT phase_id FROM phases JOIN major_events"
    " USING (major_event_id) WHERE persona_id = ?)",
    "DELETE FROM phases WHERE major_event_id IN (SELECT major_event_id FROM major_events WHERE persona_id = ?)",
    "DELETE FROM major_event_arcs WHERE major_event_id IN (SELECT major_event_id FROM major_events WHERE persona_id = ?)",
    "DELETE FROM major_events WHERE persona_id = ?",
    "DELETE FROM arc_anchor_states WHERE arc_id IN (SELECT arc_id FROM life_arcs WHERE persona_id = ?)",
    "DELETE FROM life_arcs WHERE persona_id = ?",
    "DELETE FROM snapshots WHERE persona_id = ?",
    "DELETE FROM event_seeds WHERE persona_id = ?",
    "DELETE FROM relations WHERE persona_id = ?",
    "DELETE FROM personas WHERE persona_id = ?",
    # texts stored once for many traces (trace_texts), once no trace holds them any more
    "DELETE FROM trace_texts WHERE text_id NOT IN (SELECT text_id FROM traces WHERE text_id IS NOT NULL)",
)


def _delete(wh: Warehouse, statements: tuple[str, ...], persona_id: str) -> None:
    with wh.transaction() as con:
        for sql in statements:
            con.execute(sql, [persona_id] * sql.count("?"))


def relation_names(wh: Warehouse, persona_id: str) -> list[str]:
    """The names of the persona's relations, in order: who a trace's audience can name (clonemem/privacy.py);
    none for an imported persona."""
    return [
        n
        for (n,) in wh.rows(
            "SELECT name FROM relations WHERE persona_id = ? ORDER BY seq", [persona_id]
        )
    ]


def delete_persona(wh: Warehouse, persona_id: str) -> None:
    """Everything of a persona (re-import, re-landing generation)."""
    _delete(wh, _DELETE_PERSONA, persona_id)


def delete_persona_qa(wh: Warehouse, persona_id: str) -> None:
    """Only the persona's stage-IV output (re-landing QA)."""
    _delete(wh, _DELETE_QA, persona_id)
