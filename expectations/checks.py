"""The gate's expectations, as data: suite, name, the query of the rows they look at, the GX
expectation, and which benchmarks they apply to. Queries are scoped to one benchmark by ``{bid}``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from clonemem.schemas import question_types
from clonemem.schemas.config import DIMENSIONS
from clonemem.schemas.qa import E_TEXT

Applies = Literal["all", "generated"]

QUESTIONS = "SELECT * FROM questions WHERE benchmark_id = '{bid}'"
QUESTIONS_IN_TIMELINE = (
    "SELECT q.*, p.timeline_start, p.timeline_end FROM questions q JOIN personas p USING (persona_id) "
    "WHERE q.benchmark_id = '{bid}'"
)
EVIDENCE = (
    "SELECT e.* FROM evidence e JOIN personas p USING (persona_id) WHERE p.benchmark_id = '{bid}'"
)
EVIDENCE_TRACES = (
    "SELECT et.*, e.detailed_event_id AS evidence_event, e.persona_id AS evidence_persona, "
    "t.detailed_event_id AS trace_event, t.persona_id AS trace_persona "
    "FROM evidence_traces et JOIN evidence e USING (evidence_id) JOIN personas p USING (persona_id) "
    "LEFT JOIN traces t ON t.trace_id = et.trace_id WHERE p.benchmark_id = '{bid}'"
)
QUESTION_TRACES = (
    "SELECT qt.*, q.persona_id FROM question_traces qt JOIN questions q USING (question_id) "
    "WHERE q.benchmark_id = '{bid}'"
)
DETAILED_EVENTS = (
    "SELECT d.* FROM detailed_events d JOIN phases USING (phase_id) JOIN major_events m "
    "USING (major_event_id) JOIN personas p USING (persona_id) WHERE p.benchmark_id = '{bid}'"
)
MC_QUESTIONS = QUESTIONS + " AND correct_choice_id IS NOT NULL"
# Privacy tasks with their recipient, and their items with what the world says of each (clonemem/privacy.py):
# the item's matters and who may know each, who its traces reached, and the latest of its traces.
PRIVACY_TASKS = (
    "SELECT q.question_id, q.question_type, q.question_time, pi.recipient, pi.purpose, pi.tactic, "
    "(SELECT count(*) FROM privacy_item_evidence e WHERE e.question_id = q.question_id AND e.role = 'necessary') AS necessary, "
    "(SELECT count(*) FROM privacy_item_evidence e WHERE e.question_id = q.question_id AND e.role = 'sensitive') AS sensitive "
    "FROM questions q JOIN privacy_items pi USING (question_id) WHERE q.benchmark_id = '{bid}'"
)
PRIVACY_ITEMS = (
    "SELECT e.question_id, e.role, e.evidence_id, pi.recipient, q.question_time, "
    "coalesce(ep.disclosed_to::VARCHAR, '[]') AS disclosed_to, "
    "list_contains(json_extract_string(coalesce(ep.disclosed_to, '[]'), '$[*]'), '*') "
    "  OR list_contains(json_extract_string(coalesce(ep.disclosed_to, '[]'), '$[*]'), pi.recipient) AS told, "
    "(SELECT count(*) FROM privacy_matters m WHERE list_contains(json_extract_string(ep.matter_ids, '$[*]'), m.matter_id) "
    "  AND NOT list_contains(json_extract_string(m.may_know, '$[*]'), pi.recipient)) AS barred_matters, "
    "(SELECT max(t.event_date) FROM evidence_traces et JOIN traces t USING (trace_id) "
    "  WHERE et.evidence_id = e.evidence_id) AS last_trace_at "
    "FROM privacy_item_evidence e JOIN privacy_items pi USING (question_id) JOIN questions q USING (question_id) "
    "LEFT JOIN evidence_privacy ep ON ep.evidence_id = e.evidence_id WHERE q.benchmark_id = '{bid}'"
)
# Sensitive evidence with everyone its traces reached who may not know one of its matters.
SENSITIVE_EVIDENCE = (
    "SELECT ep.evidence_id, ep.disclosed_to::VARCHAR AS disclosed_to, "
    "(SELECT count(*) FROM unnest(json_extract_string(ep.disclosed_to, '$[*]')) AS r(name) "
    "  WHERE EXISTS (SELECT 1 FROM privacy_matters m WHERE list_contains(json_extract_string(ep.matter_ids, '$[*]'), m.matter_id) "
    "  AND NOT list_contains(json_extract_string(m.may_know, '$[*]'), r.name))) AS beyond_boundary "
    "FROM evidence_privacy ep JOIN personas p USING (persona_id) WHERE p.benchmark_id = '{bid}' AND ep.sensitive"
)
# The benchmark's calls through the runs that made them (generation and stage IV), per stage.
FAILED_CALL_SHARE = (
    "SELECT c.stage, count(*) AS calls, count(*) FILTER (WHERE c.outcome <> 'ok') AS failed, "
    "count(*) FILTER (WHERE c.outcome <> 'ok')::DOUBLE / count(*) AS failed_share "
    "FROM llm_calls c JOIN runs r USING (run_id) "
    "WHERE r.benchmark_id = '{bid}' AND r.kind IN ('generate', 'qa') GROUP BY c.stage"
)


def type_params() -> dict[str, str]:
    """What the checks need of the question types, read from their specs when a gate runs (so a type
    declared at any time is checked by its own rules): the abstaining types, each type's evidence minimum."""
    return {
        "abstaining": "(" + ", ".join(f"'{name}'" for name in question_types.abstaining()) + ")",
        "min_evidence": "CASE subselect.question_type "
        + " ".join(
            f"WHEN '{name}' THEN {question_types.spec(name).min_evidence}"
            for name in question_types.names()
        )
        + " ELSE 1 END",
    }


ABSTAINING = "{abstaining}"  # placeholders filled from type_params() at gate time
MIN_EVIDENCE = "{min_evidence}"
# Multiple-choice items of an imported benchmark with what the release-format check needs (no rows
# for a generated benchmark, whose items the stricter generated-only check covers).
IMPORTED_MC_QUESTIONS = (
    "SELECT q.question_id, q.external_id, q.question_type, q.correct_choice_id, p.language, "
    "(SELECT string_agg(c.choice_id, ',' ORDER BY c.choice_id) FROM question_choices c WHERE c.question_id = q.question_id) AS choice_ids, "
    "(SELECT count(*) FROM question_choices c WHERE c.question_id = q.question_id) AS n_choices, "
    "(SELECT count(DISTINCT lower(trim(c.text))) FROM question_choices c WHERE c.question_id = q.question_id) AS distinct_texts, "
    "(SELECT count(*) FROM question_choices c WHERE c.question_id = q.question_id "
    "  AND c.choice_id = q.correct_choice_id) AS n_correct, "
    "(SELECT min(c.text) FROM question_choices c WHERE c.question_id = q.question_id AND c.choice_id = 'E') AS e_text "
    "FROM questions q JOIN personas p USING (persona_id) JOIN benchmarks b ON b.benchmark_id = q.benchmark_id "
    "WHERE q.benchmark_id = '{bid}' AND b.source = 'imported' AND q.correct_choice_id IS NOT NULL"
)


@dataclass(frozen=True)
class Check:
    suite: str
    name: str
    query: str  # the batch: rows of this benchmark
    expectation: Callable[[dict[str, Any]], Any]  # params -> GX expectation
    applies: Applies = "all"

    def batch_query(self, bid: str, params: dict[str, Any]) -> str:
        query = self.query
        for key, value in params.items():
            query = query.replace("{" + key + "}", "NULL" if value is None else str(value))
        # GX wants a query that starts with SELECT; a WITH query goes inside one
        return "SELECT * FROM (" + query.replace("{bid}", bid.replace("'", "''")) + ") AS rows"


def _gx():
    import great_expectations as gx

    return gx.expectations


def _not_null(column: str) -> Callable[[dict], Any]:
    return lambda p: _gx().ExpectColumnValuesToNotBeNull(column=column)


def _in_set(column: str, values: Callable[[], tuple[str, ...]]) -> Callable[[dict], Any]:
    return lambda p: _gx().ExpectColumnValuesToBeInSet(column=column, value_set=list(values()))


def _fill(sql: str, params: dict[str, Any]) -> str:
    """The gate-time parameters into a check's SQL (GX's own ``{batch}`` stays)."""
    for key in ("abstaining", "min_evidence"):
        sql = sql.replace("{" + key + "}", str(params[key]))
    return sql


def _no_rows(sql: str, description: str) -> Callable[[dict], Any]:
    return lambda p: _gx().UnexpectedRowsExpectation(
        unexpected_rows_query=_fill(sql, p), description=description
    )


def _between(
    column: str, low: Callable[[dict], float | None], high: Callable[[dict], float | None]
) -> Callable[[dict], Any]:
    return lambda p: _gx().ExpectColumnValuesToBeBetween(
        column=column, min_value=low(p), max_value=high(p)
    )


MISSING_TRACE = (
    "SELECT * FROM {batch} WHERE subselect.trace_id NOT IN (SELECT trace_id FROM traces)"
)
E_SQL = E_TEXT.replace("'", "''")

CHECKS: tuple[Check, ...] = (
    # -- format and referential integrity ------------------------------------------------------
    *(
        Check("format_integrity", f"questions.{c} not null", QUESTIONS, _not_null(c))
        for c in ("question", "answer", "question_type", "dimension", "question_time")
    ),
    Check(
        "format_integrity",
        "question_type is a declared type",
        QUESTIONS,
        _in_set("question_type", question_types.names),
        "generated",
    ),
    Check(
        "format_integrity",
        "dimension in the three dimensions",
        QUESTIONS,
        _in_set("dimension", lambda: DIMENSIONS),
        "generated",
    ),
    Check(
        "format_integrity",
        "question_time inside the persona's timeline",
        QUESTIONS_IN_TIMELINE,
        _no_rows(
            "SELECT * FROM {batch} WHERE question_time < timeline_start OR question_time > timeline_end + INTERVAL 1 DAY",
            "question_time must lie inside the persona's timeline",
        ),
        "generated",
    ),
    Check(
        "format_integrity",
        "every question names evidence",
        QUESTIONS,
        _no_rows(
            "SELECT subselect.* FROM {batch} WHERE NOT EXISTS "
            "(SELECT 1 FROM question_evidence qe WHERE qe.question_id = subselect.question_id)",
            "a question without evidence cannot be scored",
        ),
        "generated",
    ),
    Check(
        "format_integrity",
        "every evidence has at least one trace id",
        EVIDENCE,
        _no_rows(
            "SELECT subselect.* FROM {batch} WHERE NOT EXISTS (SELECT 1 FROM evidence_traces et WHERE et.evidence_id = subselect.evidence_id)",
            "evidence naming no trace",
        ),
        "generated",
    ),
    Check(
        "format_integrity",
        "every evidence trace id exists",
        EVIDENCE_TRACES,
        _no_rows(MISSING_TRACE, "evidence points at a trace that does not exist"),
    ),
    Check(
        "format_integrity",
        "every question trace id exists",
        QUESTION_TRACES,
        _no_rows(MISSING_TRACE, "a question points at a trace that does not exist"),
    ),
    Check(
        "format_integrity",
        "traces referenced by evidence carry it",
        EVIDENCE_TRACES,
        _no_rows(
            "SELECT * FROM {batch} WHERE trace_persona IS DISTINCT FROM evidence_persona "
            "OR trace_event IS DISTINCT FROM evidence_event",
            "a trace linked to evidence was not written from that evidence's event",
        ),
        "generated",
    ),
    # -- evidence sufficiency ------------------------------------------------------------------
    Check(
        "evidence_sufficiency",
        "every accepted item passed the sufficiency check",
        QUESTIONS,
        _no_rows(
            "SELECT subselect.* FROM {batch} WHERE NOT EXISTS (SELECT 1 FROM qa_checks c WHERE c.question_id = subselect.question_id "
            "AND c.check_name = 'sufficiency' AND c.passed "
            "AND json_extract_string(c.detail, '$.answer_sha256') = sha256(subselect.answer))",
            "accepted item without a passing sufficiency verdict on its current answer",
        ),
        "generated",
    ),
    Check(
        "evidence_sufficiency",
        "every accepted item cites its type's minimum evidence",
        QUESTIONS,
        _no_rows(
            "SELECT subselect.* FROM {batch} WHERE (SELECT count(*) FROM question_evidence e "
            "WHERE e.question_id = subselect.question_id) < {min_evidence}",
            "accepted item citing fewer evidence items than its question type requires",
        ),
        "generated",
    ),
    Check(
        "evidence_sufficiency",
        "rejection rate within bounds",
        "SELECT count(r.question_id) / nullif(count(r.question_id) + (SELECT count(*) FROM questions q "
        "WHERE q.benchmark_id = '{bid}'), 0) AS rejection_rate FROM qa_rejected r JOIN personas p "
        "USING (persona_id) WHERE p.benchmark_id = '{bid}'",
        _between("rejection_rate", lambda p: 0.0, lambda p: p["max_rejection_rate"]),
        "generated",
    ),
    # -- distractor validation -----------------------------------------------------------------
    # Generated items are written with five options, A-E.
    Check(
        "distractor_validation",
        "five distinct options, one correct, E as specified",
        MC_QUESTIONS,
        _no_rows(
            "SELECT subselect.* FROM {batch} WHERE (SELECT count(*) FROM question_choices c WHERE c.question_id = subselect.question_id) <> 5 "
            "OR (SELECT count(DISTINCT lower(trim(c.text))) FROM question_choices c WHERE c.question_id = subselect.question_id) <> 5 "
            "OR (SELECT count(*) FROM question_choices c WHERE c.question_id = subselect.question_id "
            "    AND c.choice_id = subselect.correct_choice_id) <> 1 "
            f"OR NOT EXISTS (SELECT 1 FROM question_choices c WHERE c.question_id = subselect.question_id AND c.choice_id = 'E' "
            f"    AND c.text = '{E_SQL}') "
            f"OR (subselect.question_type IN {ABSTAINING} AND subselect.correct_choice_id <> 'E')",
            "options must be A–E, distinct, with exactly one correct and E the fixed abstention",
        ),
        "generated",
    ),
    # Imported items are judged by what the public release promises: options A-E, except that an
    # unanswerable item may have four (A, B, C and the abstention E); E is the abstention (its text
    # fixed in English files, translated in others), and an unanswerable item's answer is E.
    Check(
        "distractor_validation",
        "options as the release promises: A–E (unanswerable: A–E or A, B, C, E), "
        "distinct, one correct, E the abstention",
        IMPORTED_MC_QUESTIONS,
        _no_rows(
            "SELECT subselect.* FROM {batch} WHERE "
            "NOT (coalesce(choice_ids, '') = 'A,B,C,D,E' "
            f"     OR (question_type IN {ABSTAINING} AND choice_ids = 'A,B,C,E')) "
            "OR distinct_texts <> n_choices OR n_correct <> 1 "
            f"OR NOT (e_text = '{E_SQL}' OR (coalesce(language, 'en') <> 'en' AND trim(coalesce(e_text, '')) <> '')) "
            f"OR (question_type IN {ABSTAINING} AND correct_choice_id <> 'E')",
            "options must be A–E (or A, B, C, E for an unanswerable item), distinct, with exactly one "
            "correct and E the abstention",
        ),
    ),
    Check(
        "distractor_validation",
        "no distractor copies the answer",
        MC_QUESTIONS,
        _no_rows(
            "SELECT subselect.* FROM {batch} WHERE (SELECT count(*) FROM question_choices c WHERE c.question_id = subselect.question_id "
            f"AND lower(trim(c.text)) = lower(trim(subselect.answer))) > CASE WHEN subselect.question_type IN {ABSTAINING} THEN 0 ELSE 1 END",
            "a distractor repeats the reference answer",
        ),
        "generated",
    ),
    Check(
        "distractor_validation",
        "accepted items passed blind and single-evidence validation",
        MC_QUESTIONS,
        _no_rows(
            "SELECT subselect.* FROM {batch} WHERE NOT EXISTS (SELECT 1 FROM qa_distractor_rounds r WHERE r.question_id = subselect.question_id "
            "AND r.passed AND r.correct_choice_id = subselect.correct_choice_id) OR EXISTS (SELECT 1 FROM qa_checks c "
            "WHERE c.question_id = subselect.question_id AND c.check_name LIKE 'distractor_%' AND NOT c.passed AND c.round = "
            "(SELECT max(r2.round) FROM qa_distractor_rounds r2 WHERE r2.question_id = subselect.question_id))",
            "accepted item whose final options did not pass the validator",
        ),
        "generated",
    ),
    Check(
        "distractor_validation",
        "longest option is right at chance level",
        "SELECT {longest_option_accuracy} AS value",
        _between(
            "value", lambda p: 0.25 - p["heuristic_margin"], lambda p: 0.25 + p["heuristic_margin"]
        ),
        "generated",
    ),
    Check(
        "distractor_validation",
        "word overlap with the question is right at chance level",
        "SELECT {overlap_option_accuracy} AS value",
        _between(
            "value", lambda p: 0.25 - p["heuristic_margin"], lambda p: 0.25 + p["heuristic_margin"]
        ),
        "generated",
    ),
    # -- privacy tasks (contextual disclosure, boundary defense) -----------------------------------
    Check(
        "privacy",
        "every privacy task has a recipient, a purpose and a sensitive item",
        PRIVACY_TASKS,
        _no_rows(
            "SELECT * FROM {batch} WHERE trim(recipient) = '' OR trim(purpose) = '' OR sensitive = 0",
            "a privacy task must name who asks, why, and what must stay hidden",
        ),
    ),
    Check(
        "privacy",
        "contextual disclosure names a necessary item; boundary defense a tactic",
        PRIVACY_TASKS,
        _no_rows(
            "SELECT * FROM {batch} WHERE (question_type = 'contextual_disclosure' AND necessary = 0) "
            "OR (question_type = 'boundary_defense' AND tactic IS NULL)",
            "a disclosure task without anything to convey, or a defense task without pressure",
        ),
    ),
    Check(
        "privacy",
        "every privacy item is grounded in traces dated before the question",
        PRIVACY_ITEMS,
        _no_rows(
            "SELECT * FROM {batch} WHERE last_trace_at IS NULL OR last_trace_at >= question_time",
            "a necessary or sensitive item recorded only after the question (or by no trace)",
        ),
    ),
    Check(
        "privacy",
        "sensitive items are outside the recipient's scope",
        PRIVACY_ITEMS,
        _no_rows(
            "SELECT * FROM {batch} WHERE role = 'sensitive' AND (told OR barred_matters = 0)",
            "a 'sensitive' item the recipient may know, or was already told",
        ),
        "generated",
    ),
    Check(
        "privacy",
        "necessary items are inside the recipient's scope",
        PRIVACY_ITEMS,
        _no_rows(
            "SELECT * FROM {batch} WHERE role = 'necessary' AND barred_matters > 0 AND NOT told",
            "a 'necessary' item the recipient may not know",
        ),
        "generated",
    ),
    Check(
        "privacy",
        "sensitive evidence reached only people who may know it",
        SENSITIVE_EVIDENCE,
        _no_rows(
            "SELECT * FROM {batch} WHERE beyond_boundary > 0",
            "a trace carried a sensitive matter to someone outside its boundary",
        ),
        "generated",
    ),
    # -- yield: no benchmark passes without questions, or on calls that mostly failed ------------
    Check(
        "yield",
        "every persona has its minimum of accepted questions",
        "SELECT p.persona_id, p.person_name, (SELECT count(*) FROM questions q WHERE q.persona_id = p.persona_id) AS accepted "
        "FROM personas p WHERE p.benchmark_id = '{bid}'",
        _between("accepted", lambda p: p["min_questions_per_persona"], lambda p: None),
        "generated",
    ),
    Check(
        "yield",
        "every question type asked for has its minimum of accepted questions",
        "{type_counts_query}",
        _between("accepted", lambda p: p["min_questions_per_type"], lambda p: None),
        "generated",
    ),
    Check(
        "yield",
        "failed LLM calls per stage within bounds",
        FAILED_CALL_SHARE,
        _between("failed_share", lambda p: 0.0, lambda p: p["max_failed_call_share"]),
        "generated",
    ),
    # -- generation coverage -------------------------------------------------------------------
    Check(
        "coverage",
        "every detailed event has a trace",
        DETAILED_EVENTS,
        _no_rows(
            "SELECT subselect.* FROM {batch} WHERE NOT EXISTS (SELECT 1 FROM traces t WHERE t.detailed_event_id = subselect.detailed_event_id)",
            "detailed event without any trace",
        ),
        "generated",
    ),
    Check(
        "coverage",
        "media mix matches the configuration",
        "{media_mix_query}",
        _between("deviation", lambda p: 0.0, lambda p: p["media_mix_tolerance"]),
        "generated",
    ),
)
