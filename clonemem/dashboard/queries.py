"""Every read of the dashboard: one named function per question, each one SQL query over the guarded
read-only connection (:mod:`clonemem.warehouse.guard`) returning a polars DataFrame.

Values reach the SQL only as bound parameters. Column names that depend on the warehouse's schema
version (the Runs page) come from ``information_schema`` and are quoted. Nothing here renders.
"""

from __future__ import annotations

import polars as pl

from clonemem.qa.cues import CUE_ITEMS_SQL
from clonemem.schemas.results import Provenance
from clonemem.warehouse import leaderboard as W
from clonemem.warehouse.guard import GuardedConnection as Db

# The tables every page relies on; a warehouse without them was not made by clonemem (or is empty).

# Each run row that can own LLM calls, with the benchmark it belongs to: pipeline runs, evaluations
# (whose run id is the evaluation id) and gate runs.
_RUN_BENCHMARKS = """
    SELECT run_id, benchmark_id FROM runs WHERE benchmark_id IS NOT NULL
    UNION SELECT eval_run_id, benchmark_id FROM eval_runs
    UNION SELECT run_id, benchmark_id FROM eval_runs WHERE run_id IS NOT NULL
    UNION SELECT run_id, benchmark_id FROM gate_runs WHERE run_id IS NOT NULL
"""


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


# -- catalog --------------------------------------------------------------------------------------------


def schema(db: Db) -> dict[str, list[str]]:
    """Every table and view of the main schema with its columns in order (one catalog query per render)."""
    got = db.frame(
        "SELECT table_name, list(column_name ORDER BY ordinal_position) AS columns "
        "FROM information_schema.columns WHERE table_schema = 'main' GROUP BY ALL"
    )
    return (
        {r["table_name"]: list(r["columns"]) for r in got.iter_rows(named=True)}
        if got.height
        else {}
    )


def benchmarks(db: Db, benchmark_columns: list[str]) -> pl.DataFrame:
    """One row per benchmark: source, gate and landing status, counts, when it was created and its config hash.

    ``created`` is the benchmark's own ``created_at`` where the schema has one, else the earliest run
    recorded for it (generation, gate or evaluation); ``config_hash`` is the first 12 hex digits of the
    SHA-256 of its stored config (generation config, or import options). ``benchmark_columns``: the
    table's columns in this warehouse (``schema``)."""
    status = "coalesce(b.status, 'complete')" if "status" in benchmark_columns else "'complete'"
    own_created = "b.created_at" if "created_at" in benchmark_columns else "NULL::TIMESTAMP"
    return db.frame(f"""
        WITH p AS (SELECT benchmark_id, count(*) AS personas FROM personas GROUP BY ALL),
             t AS (SELECT p.benchmark_id, count(*) AS traces FROM traces JOIN personas p USING (persona_id) GROUP BY ALL),
             q AS (SELECT benchmark_id, count(*) AS questions FROM questions GROUP BY ALL),
             first_run AS (
                SELECT benchmark_id, min(started_at) AS started_at FROM (
                    SELECT benchmark_id, started_at FROM runs UNION ALL
                    SELECT benchmark_id, started_at FROM gate_runs UNION ALL
                    SELECT benchmark_id, started_at FROM eval_runs) GROUP BY ALL)
        SELECT b.benchmark_id, b.name, b.source, b.gate_status, {status} AS status, b.is_offline, b.language,
               coalesce(p.personas, 0) AS personas, coalesce(t.traces, 0) AS traces,
               coalesce(q.questions, 0) AS questions,
               coalesce({own_created}, first_run.started_at) AS created,
               left(sha256(b.config_json::VARCHAR), 12) AS config_hash
        FROM benchmarks b LEFT JOIN p USING (benchmark_id) LEFT JOIN t USING (benchmark_id)
             LEFT JOIN q USING (benchmark_id) LEFT JOIN first_run USING (benchmark_id)
        ORDER BY b.name""")


def benchmark_config(db: Db, benchmark_id: str) -> pl.DataFrame:
    """The stored configuration (generation config or import options) as JSON text."""
    return db.frame(
        "SELECT config_json::VARCHAR AS config_json FROM benchmarks WHERE benchmark_id = ?",
        [benchmark_id],
    )


def spend_by_benchmark(db: Db) -> pl.DataFrame:
    """LLM calls, tokens and estimated cost per benchmark, through the runs that made them; calls whose
    run names no benchmark (or no run at all) are one row with a null benchmark."""
    return db.frame(f"""
        WITH rb AS ({_RUN_BENCHMARKS})
        SELECT b.name AS benchmark, count(*) AS calls,
               count(*) FILTER (WHERE c.outcome <> 'ok') AS failed_calls,
               sum(c.input_tokens) AS input_tokens, sum(c.output_tokens) AS output_tokens,
               sum(c.cost_usd) AS cost_usd, bool_and(c.is_offline) AS all_offline
        FROM llm_calls c LEFT JOIN rb USING (run_id) LEFT JOIN benchmarks b USING (benchmark_id)
        GROUP BY ALL ORDER BY benchmark NULLS LAST""")


def spend_for(db: Db, benchmark_id: str) -> pl.DataFrame:
    """The benchmark's LLM spend by role, provider and model (calls of its runs; see ``spend_by_benchmark``)."""
    return db.frame(
        f"""
        WITH rb AS ({_RUN_BENCHMARKS})
        SELECT c.role, c.provider, c.model, bool_and(c.is_offline) AS offline, count(*) AS calls,
               count(*) FILTER (WHERE c.outcome <> 'ok') AS failed_calls,
               sum(c.input_tokens) AS input_tokens, sum(c.output_tokens) AS output_tokens,
               sum(c.cost_usd) AS cost_usd, count(*) FILTER (WHERE c.cost_usd IS NULL) AS unpriced_calls
        FROM llm_calls c JOIN rb USING (run_id)
        WHERE rb.benchmark_id = ?
        GROUP BY ALL ORDER BY calls DESC, c.role, c.model""",
        [benchmark_id],
    )


def unattributed_spend(db: Db) -> pl.DataFrame:
    """LLM calls that no benchmark's run owns (no run id, or a run id with no benchmark), by stage and role."""
    return db.frame(f"""
        WITH rb AS ({_RUN_BENCHMARKS})
        SELECT c.stage, c.role, c.provider, c.model, count(*) AS calls,
               sum(c.input_tokens) AS input_tokens, sum(c.output_tokens) AS output_tokens, sum(c.cost_usd) AS cost_usd
        FROM llm_calls c LEFT JOIN rb USING (run_id)
        WHERE rb.benchmark_id IS NULL
        GROUP BY ALL ORDER BY calls DESC""")


# -- generation ------------------------------------------------------------------------------------------


def personas(db: Db, benchmark_id: str) -> pl.DataFrame:
    return db.frame(
        """
        SELECT persona_id, person_key, person_name, language, timeline_start, timeline_end, source_file
        FROM personas WHERE benchmark_id = ? ORDER BY seq""",
        [benchmark_id],
    )


def generation_counts(db: Db, persona_id: str) -> pl.DataFrame:
    """How much of the generation graph a persona has (all zero for an imported persona)."""
    return db.frame(
        """
        SELECT (SELECT count(*) FROM life_arcs WHERE persona_id = $p) AS arcs,
               (SELECT count(*) FROM major_events WHERE persona_id = $p) AS major_events,
               (SELECT count(*) FROM phases ph JOIN major_events m USING (major_event_id) WHERE m.persona_id = $p) AS phases,
               (SELECT count(*) FROM detailed_events d JOIN phases ph USING (phase_id)
                  JOIN major_events m USING (major_event_id) WHERE m.persona_id = $p) AS detailed_events,
               (SELECT count(*) FROM evidence WHERE persona_id = $p) AS evidence,
               (SELECT count(*) FROM traces WHERE persona_id = $p) AS traces""",
        {"p": persona_id},
    )


def arc_segments(db: Db, persona_id: str) -> pl.DataFrame:
    """Each life arc's anchor state from one aligned major event to the next (the last runs to the end of
    the timeline): the arcs' progression on the time axis."""
    return db.frame(
        """
        WITH ev AS (
            SELECT major_event_id, event_date, title,
                   lead(event_date) OVER (ORDER BY event_date, seq) AS next_date
            FROM major_events WHERE persona_id = $p),
        tl AS (SELECT timeline_end FROM personas WHERE persona_id = $p)
        SELECT a.seq AS arc_seq, a.dimension, a.title AS arc, ev.title AS major_event, ev.event_date AS start,
               greatest(coalesce(ev.next_date, tl.timeline_end, ev.event_date), ev.event_date) AS "end",
               ma.anchor_idx, s.state
        FROM life_arcs a JOIN major_event_arcs ma USING (arc_id) JOIN ev USING (major_event_id) CROSS JOIN tl
             LEFT JOIN arc_anchor_states s ON s.arc_id = a.arc_id AND s.idx = ma.anchor_idx
        WHERE a.persona_id = $p ORDER BY a.seq, ev.event_date""",
        {"p": persona_id},
    )


def major_events(db: Db, persona_id: str) -> pl.DataFrame:
    return db.frame(
        """
        SELECT m.seq, m.event_date, m.title, m.description, count(ma.arc_id) AS aligned_arcs
        FROM major_events m LEFT JOIN major_event_arcs ma USING (major_event_id)
        WHERE m.persona_id = ? GROUP BY ALL ORDER BY m.event_date, m.seq""",
        [persona_id],
    )


def phases(db: Db, persona_id: str) -> pl.DataFrame:
    """Phases in timeline order with the snapshot they end on (Algorithm 1's carried state)."""
    return db.frame(
        """
        SELECT m.title AS major_event, ph.seq, ph.title AS phase, ph.start_date AS start, ph.end_date AS "end",
               s.dominant_emotion, s.energy, s.stress, s.attentional_focus,
               (SELECT count(*) FROM detailed_events d WHERE d.phase_id = ph.phase_id) AS detailed_events
        FROM phases ph JOIN major_events m USING (major_event_id)
             LEFT JOIN snapshots s ON s.snapshot_id = ph.snapshot_after_id
        WHERE m.persona_id = ? ORDER BY ph.start_date, m.seq, ph.seq""",
        [persona_id],
    )


def traces_per_month(db: Db, persona_id: str) -> pl.DataFrame:
    return db.frame(
        """
        SELECT date_trunc('month', event_date) AS month, medium, count(*) AS traces
        FROM traces WHERE persona_id = ? GROUP BY ALL ORDER BY month, medium""",
        [persona_id],
    )


def trace_media(db: Db, persona_id: str) -> pl.DataFrame:
    return db.frame(
        "SELECT medium, count(*) AS traces FROM traces WHERE persona_id = ? GROUP BY ALL ORDER BY traces DESC",
        [persona_id],
    )


def trace_date_range(db: Db, persona_id: str) -> pl.DataFrame:
    return db.frame(
        "SELECT min(event_date) AS first, max(event_date) AS last FROM traces WHERE persona_id = ?",
        [persona_id],
    )


def traces(
    db: Db, persona_id: str, media: list[str], first: object, last: object, limit: int
) -> pl.DataFrame:
    """Traces of a persona in the media and the inclusive date range, newest first, each with how many
    questions cite it (as evidence or among their trace ids); at most ``limit`` rows, and ``matching``
    (the same on every row) counts them all."""
    return db.frame(
        """
        WITH t AS (
            SELECT trace_id, external_id, event_date, medium, is_noise, content
            FROM v_traces WHERE persona_id = $p AND list_contains($media, medium)
              AND event_date::DATE BETWEEN $first AND $last),
        cites AS (
            SELECT et.trace_id, qe.question_id FROM question_evidence qe JOIN evidence_traces et USING (evidence_id)
            WHERE et.trace_id IN (SELECT trace_id FROM t)
            UNION SELECT trace_id, question_id FROM question_traces WHERE trace_id IN (SELECT trace_id FROM t))
        SELECT t.trace_id, t.external_id, t.event_date, t.medium, t.is_noise,
               (SELECT count(DISTINCT c.question_id) FROM cites c WHERE c.trace_id = t.trace_id) AS cited_by,
               length(t.content) AS characters, t.content, count(*) OVER () AS matching
        FROM t ORDER BY t.event_date DESC, t.external_id LIMIT $limit""",
        {"p": persona_id, "media": media, "first": first, "last": last, "limit": limit},
    )


def trace(db: Db, trace_id: str) -> pl.DataFrame:
    """One trace in full, with what generation wrote around it (detailed event, intent, audience)."""
    return db.frame(
        """
        SELECT t.trace_id, t.external_id, t.event_date, t.medium, t.is_noise, t.content, t.intent, t.audience,
               t.key_information::VARCHAR AS key_information, d.title AS detailed_event
        FROM v_traces t LEFT JOIN detailed_events d USING (detailed_event_id) WHERE t.trace_id = ?""",
        [trace_id],
    )


def trace_citations(db: Db, trace_id: str) -> pl.DataFrame:
    """The questions that cite a trace: through an evidence statement (with the statement), or among the
    question's trace ids only."""
    return db.frame(
        """
        WITH via_evidence AS (
            SELECT qe.question_id, e.statement FROM evidence_traces et JOIN evidence e USING (evidence_id)
            JOIN question_evidence qe USING (evidence_id) WHERE et.trace_id = $t),
        listed AS (SELECT question_id FROM question_traces WHERE trace_id = $t)
        SELECT q.question_id, q.external_id, q.question_type, q.dimension, q.question,
               v.statement AS evidence_statement, v.question_id IS NOT NULL AS as_evidence
        FROM questions q LEFT JOIN via_evidence v USING (question_id)
        WHERE q.question_id IN (SELECT question_id FROM via_evidence UNION SELECT question_id FROM listed)
        ORDER BY q.seq, q.external_id""",
        {"t": trace_id},
    )


# -- QA quality ------------------------------------------------------------------------------------------


def qc_funnel(db: Db, benchmark_id: str) -> pl.DataFrame:
    """Stage IV quality control per question type and dimension: items with a feasible plan (every item
    that reached quality control), items written (a format check), rejected at format, at the sufficiency
    check and in the distractor loop, and accepted."""
    return db.frame(
        """
        WITH persona AS (SELECT persona_id FROM personas WHERE benchmark_id = $b),
        items AS (
            SELECT question_id, question_type, dimension, 'accepted' AS outcome FROM questions
            WHERE benchmark_id = $b AND segment_id IS NOT NULL
            UNION ALL
            SELECT question_id, question_type, dimension, 'rejected_' || stage FROM qa_rejected
            WHERE persona_id IN (SELECT persona_id FROM persona)),
        written AS (SELECT DISTINCT question_id FROM qa_checks WHERE check_name = 'format'
                    AND question_id IN (SELECT question_id FROM items))
        SELECT coalesce(i.question_type, '?') AS question_type, coalesce(i.dimension, '?') AS dimension,
               count(*) AS planned,
               count(w.question_id) AS written,
               count(*) FILTER (WHERE outcome = 'rejected_format') AS rejected_format,
               count(*) FILTER (WHERE outcome = 'rejected_sufficiency') AS rejected_sufficiency,
               count(*) FILTER (WHERE outcome = 'rejected_distractors') AS rejected_distractors,
               count(*) FILTER (WHERE outcome = 'accepted') AS accepted
        FROM items i LEFT JOIN written w USING (question_id)
        GROUP BY ALL ORDER BY question_type, dimension""",
        {"b": benchmark_id},
    )


def infeasible_plans(db: Db, benchmark_id: str) -> pl.DataFrame:
    """Candidates the writer judged infeasible at planning: stage IV records them only as a count in its
    landing summary (cumulative over the personas of one run, so the largest figure is the run's total)."""
    return db.frame(
        """
        SELECT max(TRY_CAST(json_extract(summary, '$.status.infeasible') AS BIGINT)) AS infeasible
        FROM qa_landings WHERE benchmark_id = ?""",
        [benchmark_id],
    )


def distractor_rounds(db: Db, benchmark_id: str) -> pl.DataFrame:
    """Per distractor-loop round: items drafted, passing the blind check and the single-evidence check."""
    return db.frame(
        """
        SELECT c.round, c.check_name, count(*) AS items, count(*) FILTER (WHERE c.passed) AS passed
        FROM qa_checks c
        WHERE c.check_name LIKE 'distractor%' AND c.question_id IN (
            SELECT question_id FROM questions WHERE benchmark_id = $b
            UNION SELECT question_id FROM qa_rejected WHERE persona_id IN
                (SELECT persona_id FROM personas WHERE benchmark_id = $b))
        GROUP BY ALL ORDER BY c.round, c.check_name""",
        {"b": benchmark_id},
    )


def rejections(db: Db, benchmark_id: str, limit: int = 200) -> pl.DataFrame:
    return db.frame(
        """
        SELECT r.stage, r.question_type, r.dimension, r.reason,
               json_extract_string(r.draft, '$.question') AS draft_question
        FROM qa_rejected r JOIN personas p USING (persona_id)
        WHERE p.benchmark_id = ? ORDER BY r.stage, r.question_type LIMIT ?""",
        [benchmark_id, limit],
    )


def cue_items(db: Db, benchmark_id: str) -> pl.DataFrame:
    """Accepted multiple-choice items with their options in order (the gate's superficial-cue input)."""
    return db.frame(CUE_ITEMS_SQL, [benchmark_id]).sort("question_id")


def composition(db: Db, benchmark_id: str) -> pl.DataFrame:
    """Questions per type and dimension (multiple-choice ones counted apart)."""
    return db.frame(
        """
        SELECT question_type, question_type_known, dimension, count(*) AS questions,
               count(*) FILTER (WHERE correct_choice_id IS NOT NULL) AS multiple_choice
        FROM questions WHERE benchmark_id = ? GROUP BY ALL ORDER BY question_type, dimension""",
        [benchmark_id],
    )


def media_composition(db: Db, benchmark_id: str) -> pl.DataFrame:
    """Traces per medium, and how many of them some question cites through its evidence."""
    return db.frame(
        """
        WITH cited AS (
            SELECT DISTINCT et.trace_id FROM question_evidence qe JOIN evidence_traces et USING (evidence_id)
            JOIN questions q USING (question_id) WHERE q.benchmark_id = $b)
        SELECT t.medium, count(*) AS traces, count(*) FILTER (WHERE t.is_noise) AS noise,
               count(c.trace_id) AS cited_as_evidence
        FROM traces t JOIN personas p USING (persona_id) LEFT JOIN cited c USING (trace_id)
        WHERE p.benchmark_id = $b GROUP BY ALL ORDER BY traces DESC""",
        {"b": benchmark_id},
    )


def gate_runs(db: Db, benchmark_id: str) -> pl.DataFrame:
    return db.frame(
        """
        SELECT gate_run_id, status, started_at, finished_at, data_docs_path,
               TRY_CAST(json_extract(summary, '$.expectations') AS BIGINT) AS expectations,
               TRY_CAST(json_extract(summary, '$.failed') AS BIGINT) AS failed
        FROM gate_runs WHERE benchmark_id = ? ORDER BY started_at DESC""",
        [benchmark_id],
    )


def gate_results(db: Db, gate_run_id: str) -> pl.DataFrame:
    """Every expectation of one gate run, failures first, with what it observed and its failing samples;
    a bounded expectation (a rate, a cue accuracy, the media mix) with its measured value and bounds
    (``measured`` and ``bound`` are null for gate runs that stored no measured value)."""
    return db.frame(
        """
        SELECT suite, expectation, success,
               CASE WHEN json_type(observed) = 'OBJECT' THEN json_extract(observed, '$.value')::DOUBLE END AS measured,
               CASE WHEN json_type(observed) = 'OBJECT' AND json_exists(observed, '$.min_value')
                    THEN '[' || coalesce(json_extract(observed, '$.min_value')::VARCHAR, '-inf') || ', '
                         || coalesce(json_extract(observed, '$.max_value')::VARCHAR, 'inf') || ']' END AS bound,
               unexpected_count, observed::VARCHAR AS observed, failing_sample::VARCHAR AS failing_sample
        FROM gate_results WHERE gate_run_id = ? ORDER BY success, suite, expectation""",
        [gate_run_id],
    )


# -- question inspector ------------------------------------------------------------------------------------


def question_index(
    db: Db, benchmark_id: str, persona_id: str | None, question_type: str | None
) -> pl.DataFrame:
    """The questions to pick from (optionally one persona's, one type's), in benchmark order."""
    return db.frame(
        """
        SELECT q.question_id, q.external_id, p.person_name, q.question_type, q.dimension, q.question
        FROM questions q JOIN personas p USING (persona_id)
        WHERE q.benchmark_id = $b AND ($p IS NULL OR q.persona_id = $p) AND ($t IS NULL OR q.question_type = $t)
        ORDER BY p.seq, q.seq, q.external_id""",
        {"b": benchmark_id, "p": persona_id, "t": question_type},
    )


def question(db: Db, question_id: str) -> pl.DataFrame:
    return db.frame(
        """
        SELECT q.question_id, q.external_id, p.person_name, q.question_type, q.source_question_type, q.dimension,
               q.question_time, q.question, q.answer, q.correct_choice_id, q.adversarial_answer,
               a.title AS life_arc
        FROM questions q JOIN personas p USING (persona_id) LEFT JOIN life_arcs a USING (arc_id)
        WHERE q.question_id = ?""",
        [question_id],
    )


def question_choices(db: Db, question_id: str) -> pl.DataFrame:
    return db.frame(
        """
        SELECT c.choice_id, c.text, c.choice_id = q.correct_choice_id AS correct
        FROM question_choices c JOIN questions q USING (question_id) WHERE c.question_id = ? ORDER BY c.seq""",
        [question_id],
    )


def question_evidence(db: Db, question_id: str) -> pl.DataFrame:
    """Evidence statements of a question (in order), each with its traces."""
    return db.frame(
        """
        SELECT qe.seq AS evidence, e.statement, e.kind, et.seq AS trace_seq, t.trace_id, t.external_id,
               t.medium, t.event_date, t.content
        FROM question_evidence qe JOIN evidence e USING (evidence_id)
             LEFT JOIN evidence_traces et USING (evidence_id) LEFT JOIN traces t ON t.trace_id = et.trace_id
        WHERE qe.question_id = ? ORDER BY qe.seq, et.seq""",
        [question_id],
    )


def question_gold_traces(db: Db, question_id: str) -> pl.DataFrame:
    """The question's trace ids (its ``digital_trace_ids``) with their external ids."""
    return db.frame(
        """
        SELECT qt.trace_id, t.external_id FROM question_traces qt LEFT JOIN traces t USING (trace_id)
        WHERE qt.question_id = ? ORDER BY qt.seq""",
        [question_id],
    )


def eval_runs(db: Db, benchmark_id: str) -> pl.DataFrame:
    """Evaluations of a benchmark, newest first, with their systems and k values."""
    return db.frame(
        """
        SELECT e.eval_run_id, e.started_at, e.finished_at, e.forced,
               (SELECT string_agg(DISTINCT system, ', ' ORDER BY system) FROM eval_system_stats s
                 WHERE s.eval_run_id = e.eval_run_id) AS systems,
               (SELECT list_sort(list(DISTINCT k)) FROM eval_metrics m
                 WHERE m.eval_run_id = e.eval_run_id AND m.group_by = 'all') AS ks
        FROM eval_runs e WHERE e.benchmark_id = ? ORDER BY e.started_at DESC""",
        [benchmark_id],
    )


def eval_provenance(db: Db, eval_run_id: str, table_columns: list[str]) -> Provenance | None:
    """Where an evaluation's numbers came from; None for an evaluation landed before provenance was
    recorded (or a warehouse whose ``eval_runs`` has no such column: ``table_columns``)."""
    if "provenance_json" not in table_columns:
        return None
    frame = db.frame(
        "SELECT provenance_json::VARCHAR AS p FROM eval_runs WHERE eval_run_id = ?", [eval_run_id]
    )
    if frame.height == 0 or frame["p"][0] is None:
        return None
    return Provenance.model_validate_json(frame["p"][0])


def question_retrievals(db: Db, eval_run_id: str, question_id: str) -> pl.DataFrame:
    """Each system's ranked retrieved trace ids for one question (JSON list text, rank order)."""
    return db.frame(
        """
        SELECT system, retrieved_trace_ids::VARCHAR AS retrieved, latency_ms
        FROM eval_retrievals WHERE eval_run_id = ? AND question_id = ? ORDER BY system""",
        [eval_run_id, question_id],
    )


def trace_labels(db: Db, trace_ids: list[str]) -> pl.DataFrame:
    """External id, medium, date and the first characters of the given traces."""
    return db.frame(
        """
        SELECT trace_id, external_id, medium, event_date, left(content, 160) AS excerpt
        FROM v_traces WHERE list_contains(?, trace_id)""",
        [trace_ids],
    )


def question_answers(db: Db, eval_run_id: str, question_id: str) -> pl.DataFrame:
    return db.frame(
        """
        SELECT a.system, a.k, a.predicted_choice_id, a.predicted_choice_id = q.correct_choice_id AS correct,
               a.context_tokens, a.answer_text
        FROM eval_answers a JOIN questions q USING (question_id)
        WHERE a.eval_run_id = ? AND a.question_id = ? ORDER BY a.system, a.k""",
        [eval_run_id, question_id],
    )


def question_judgments(db: Db, eval_run_id: str, question_id: str) -> pl.DataFrame:
    return db.frame(
        """
        SELECT system, k, metric, score, scored, reason FROM eval_judgments
        WHERE eval_run_id = ? AND question_id = ? ORDER BY system, k, metric""",
        [eval_run_id, question_id],
    )


def question_scores(db: Db, eval_run_id: str, question_id: str) -> pl.DataFrame:
    """Each system's stored per-question diagnosis at every k: the first failing step (write, read, use)
    or correct, from ``eval_question_scores`` (null where the evaluation recorded none)."""
    return db.frame(
        """
        SELECT system, k, CASE WHEN write_failure = 1 THEN 'write' WHEN read_failure = 1 THEN 'read'
                               WHEN utilization_failure = 1 THEN 'use' WHEN correct = 1 THEN 'correct' END AS diagnosis
        FROM eval_question_scores WHERE eval_run_id = ? AND question_id = ? ORDER BY system, k""",
        [eval_run_id, question_id],
    )


def question_protocol_scores(db: Db, eval_run_id: str, question_id: str) -> pl.DataFrame:
    """One question's scores under the standard protocols (migration 0024): per protocol, system,
    k and granularity (``qa``: the answer at k; ``turn``/``session``: retrieval at that cut-off),
    each metric's value (null: unscored, with the reason), and what the protocol scored (its answer
    and judge label)."""
    return db.frame(
        """
        SELECT s.protocol, s.protocol_version, s.system, s.k, s.granularity, s.metric, s.value,
               s.reason, a.answer_text, a.judge_label, a.judge_reason, a.given
        FROM eval_protocol_scores s
        LEFT JOIN eval_protocol_answers a ON a.eval_run_id = s.eval_run_id
             AND a.protocol = s.protocol AND a.system = s.system AND a.k = s.k
             AND a.question_id = s.question_id AND s.granularity = 'qa'
        WHERE s.eval_run_id = ? AND s.question_id = ?
        ORDER BY s.protocol, s.system, s.granularity, s.k, s.metric""",
        [eval_run_id, question_id],
    )


def eval_systems(db: Db, eval_run_id: str) -> pl.DataFrame:
    """The systems of one evaluation."""
    return db.frame(
        "SELECT DISTINCT system FROM eval_system_stats WHERE eval_run_id = ? ORDER BY system",
        [eval_run_id],
    )


# what a "failed" filter of the inspector means: a column of eval_question_scores equal to 1
FAILURES = {
    "wrong (not correct)": "correct",
    "failed at write": "write_failure",
    "failed at read": "read_failure",
    "failed at use": "utilization_failure",
}


def failed_questions(db: Db, eval_run_id: str, system: str, k: int, failure: str) -> pl.DataFrame:
    """Question ids that ``system`` failed at k in one evaluation: ``failure`` is a key of :data:`FAILURES`
    (wrong: its diagnosis is not 'correct'; else the question's first failing step)."""
    column = FAILURES[failure]
    condition = "correct = 0" if column == "correct" else f"{_q(column)} = 1"
    return db.frame(
        f"""
        SELECT question_id FROM eval_question_scores
        WHERE eval_run_id = ? AND system = ? AND k = ? AND {condition}""",
        [eval_run_id, system, k],
    )


def eval_models(db: Db, eval_run_id: str, table_columns: list[str]) -> pl.DataFrame:
    """The answerer and judge of one evaluation (from its provenance, else its stored config) and whether
    they ran offline: its answers' ``is_offline``, its judge calls' ``llm_calls.is_offline``."""
    prov = "e.provenance_json" if "provenance_json" in table_columns else "NULL::JSON"
    return db.frame(
        f"""
        SELECT coalesce(json_extract_string({prov}, '$.answerer'),
                        json_extract_string(e.config_json, '$.models.answerer')) AS answerer,
               coalesce(json_extract_string({prov}, '$.judge'),
                        json_extract_string(e.config_json, '$.models.judge')) AS judge,
               (SELECT bool_or(a.is_offline) FROM eval_answers a WHERE a.eval_run_id = e.eval_run_id) AS answers_offline,
               (SELECT bool_or(c.is_offline) FROM llm_calls c
                 WHERE c.run_id = e.eval_run_id AND c.role = 'judge') AS judge_calls_offline
        FROM eval_runs e WHERE e.eval_run_id = ?""",
        [eval_run_id],
    )


# -- leaderboard -----------------------------------------------------------------------------------------


def metrics(db: Db, eval_run_id: str, group_by: str = "all") -> pl.DataFrame:
    """Aggregated metrics of one evaluation with their 95% bootstrap intervals, for one grouping."""
    return db.frame(
        """
        SELECT system, k, group_value, metric, n, value, ci_low, ci_high FROM eval_metrics
        WHERE eval_run_id = ? AND group_by = ? ORDER BY metric, k, system, group_value""",
        [eval_run_id, group_by],
    )


def efficiency(db: Db, eval_run_id: str) -> pl.DataFrame:
    """Per system: mean context tokens handed to the answerer (per k), build time, retrieval latency, LLM use."""
    return db.frame(
        """
        WITH ctx AS (SELECT system, k, avg(context_tokens) AS context_tokens FROM eval_answers
                     WHERE eval_run_id = $e GROUP BY ALL)
        SELECT s.system, ctx.k, ctx.context_tokens, s.build_seconds, s.retrieval_p50_ms, s.retrieval_p95_ms,
               s.llm_calls, s.llm_tokens
        FROM eval_system_stats s LEFT JOIN ctx USING (system)
        WHERE s.eval_run_id = $e ORDER BY s.system, ctx.k""",
        {"e": eval_run_id},
    )


def source_category_scores(db: Db, eval_run_id: str) -> pl.DataFrame:
    """Per-question scores of one evaluation with each question's own category in its source file
    (LoCoMo's ``source_category`` with its label ``source_question_type``), for questions that have one."""
    return db.frame(
        """
        SELECT s.*, q.source_category::VARCHAR || ' ' || coalesce(q.source_question_type, '') AS source_category
        FROM eval_question_scores s JOIN questions q USING (question_id)
        WHERE s.eval_run_id = ? AND q.source_category IS NOT NULL""",
        [eval_run_id],
    )


def has_source_categories(db: Db, benchmark_id: str) -> bool:
    """Whether the benchmark's questions carry a source category (LoCoMo's 1-5)."""
    return bool(
        db.frame(
            "SELECT count(*) AS n FROM questions WHERE benchmark_id = ? AND source_category IS NOT NULL",
            [benchmark_id],
        )["n"][0]
    )


# -- runs ------------------------------------------------------------------------------------------------


def run_rows(db: Db, table: str, table_columns: list[str]) -> pl.DataFrame:
    """Every column of ``runs`` or ``eval_runs`` that the schema has (Prefect flow-run and deployment ids
    included where present) but the JSON payloads and the benchmark id (its name comes first instead),
    with the duration in seconds; what a run is and when come first, ids last. ``table_columns``: the
    table's columns in this warehouse (``schema``)."""
    if table not in ("runs", "eval_runs"):
        raise ValueError(f"not a run table: {table}")
    have = [c for c in table_columns if not c.endswith("_json") and c != "benchmark_id"]
    if not have:
        return pl.DataFrame()
    first = [c for c in ("kind", "status", "forced", "started_at", "finished_at") if c in have]
    prefect = [c for c in have if ("flow_run" in c or "deployment" in c) and c not in first]
    rest = [c for c in have if c not in first and c not in prefect]
    select = ", ".join(f"r.{_q(c)}" for c in first)
    select += ", date_diff('millisecond', r.started_at, r.finished_at) / 1000.0 AS seconds"
    select += "".join(f", r.{_q(c)}" for c in prefect + rest)
    return db.frame(f"""
        SELECT b.name AS benchmark, {select}
        FROM {table} r LEFT JOIN benchmarks b USING (benchmark_id) ORDER BY r.started_at DESC""")


def run_summaries(db: Db, runs_columns: list[str]) -> pl.DataFrame:
    """Pipeline runs' JSON summaries (their fields vary by kind and version)."""
    if "summary_json" not in runs_columns:
        return pl.DataFrame()
    return db.frame(
        "SELECT run_id, summary_json::VARCHAR AS summary FROM runs ORDER BY started_at DESC"
    )


def calls_by_run_stage(db: Db) -> pl.DataFrame:
    """LLM calls grouped by run and stage: calls, failures, attempts, tokens, cost and latency."""
    return db.frame("""
        SELECT run_id, stage, count(*) AS calls, count(*) FILTER (WHERE outcome <> 'ok') AS failed_calls,
               sum(attempts) AS attempts, sum(input_tokens + output_tokens) AS tokens, sum(cost_usd) AS cost_usd,
               round(median(latency_ms), 2) AS median_latency_ms, min(started_at) AS first_call,
               max(started_at) AS last_call
        FROM llm_calls GROUP BY ALL ORDER BY first_call, stage""")


# -- history ---------------------------------------------------------------------------------------------


# -- the gym (on-policy evaluation) ---------------------------------------------------------------------


def gym_runs(db: Db) -> pl.DataFrame:
    """Every gym run, newest first, with its (N_p, N_s, N_i), systems, exposure rate and bounds."""
    return db.frame("""
        SELECT gym_run_id, config_name, started_at, systems, reference, periods, states_per_question,
               turns_per_exposure, exposure_rate, random_bound, upper_bound,
               config_name || ' (' || periods || ', ' || states_per_question || ', ' || turns_per_exposure || ')' AS detail
        FROM gym_runs ORDER BY started_at DESC, gym_run_id""")


def gym_position_metrics(db: Db, gym_run_id: str) -> pl.DataFrame:
    """Accuracy and memory score per system and evaluation position (on-policy), and the bounds per position."""
    return db.frame(
        """
        SELECT system, metric, position, value FROM gym_metrics
        WHERE gym_run_id = ? AND position IS NOT NULL AND policy = 'on'
        ORDER BY system, metric, position""",
        [gym_run_id],
    )


def gym_overall(db: Db, gym_run_id: str) -> pl.DataFrame:
    """One row per system: accuracy with its interval, memory score on- and off-policy, ranks, misses by cause."""
    return db.frame(
        """
        SELECT system,
               max(value) FILTER (WHERE policy = 'on' AND metric = 'accuracy') AS accuracy,
               max(ci_low) FILTER (WHERE policy = 'on' AND metric = 'accuracy') AS ci_low,
               max(ci_high) FILTER (WHERE policy = 'on' AND metric = 'accuracy') AS ci_high,
               max(value) FILTER (WHERE policy = 'on' AND metric = 'memory_score') AS memory_score,
               max(value) FILTER (WHERE policy = 'off' AND metric = 'memory_score') AS off_policy_memory_score,
               max(value) FILTER (WHERE policy = 'on' AND metric = 'rank')::INTEGER AS on_policy_rank,
               max(value) FILTER (WHERE policy = 'off' AND metric = 'rank')::INTEGER AS off_policy_rank,
               max(value) FILTER (WHERE metric = 'write') AS write_misses,
               max(value) FILTER (WHERE metric = 'read') AS read_misses,
               max(value) FILTER (WHERE metric = 'use') AS use_misses
        FROM gym_metrics WHERE gym_run_id = ? AND position IS NULL AND system <> '(bounds)'
        GROUP BY system ORDER BY on_policy_rank, system""",
        [gym_run_id],
    )


def gym_conversation_index(db: Db, gym_run_id: str) -> pl.DataFrame:
    """(system, persona, period) that have turns, for the conversation viewer's pickers."""
    return db.frame(
        """
        SELECT DISTINCT t.system, t.persona_id, s.person_key, t.period
        FROM gym_turns t JOIN (SELECT DISTINCT persona_id, person_key FROM gym_states WHERE gym_run_id = ?) s
          USING (persona_id)
        WHERE t.gym_run_id = ? ORDER BY t.system, s.person_key, t.period""",
        [gym_run_id, gym_run_id],
    )


def gym_states(db: Db, gym_run_id: str, persona_id: str, period: int) -> pl.DataFrame:
    """The persona's states in the period, with the period's life event and what changed."""
    return db.frame(
        """
        SELECT label, value, changed, event_title, period_date FROM gym_states
        WHERE gym_run_id = ? AND persona_id = ? AND period = ? ORDER BY variable""",
        [gym_run_id, persona_id, period],
    )


def gym_turns(db: Db, gym_run_id: str, system: str, persona_id: str, period: int) -> pl.DataFrame:
    """The period's sessions with the system, in order: each turn's speaker, text and time."""
    return db.frame(
        """
        SELECT session, turn, speaker, text, said_at FROM gym_turns
        WHERE gym_run_id = ? AND system = ? AND persona_id = ? AND period = ?
        ORDER BY said_at, session, turn, speaker = 'assistant'""",
        [gym_run_id, system, persona_id, period],
    )


def gym_answers(
    db: Db, gym_run_id: str, system: str, persona_id: str, position: int
) -> pl.DataFrame:
    """The questions asked after the period (on- and off-policy): the choice, the right one, why it was missed."""
    return db.frame(
        """
        SELECT policy, question, choice_id, correct_id, correct, diagnosis FROM gym_answers
        WHERE gym_run_id = ? AND system = ? AND persona_id = ? AND position = ?
        ORDER BY policy, question_id""",
        [gym_run_id, system, persona_id, position],
    )


def metric_history(db: Db, benchmark_id: str) -> pl.DataFrame:
    """Every evaluation's overall figures (group ``all``) of a benchmark with their 95% intervals, oldest
    evaluation first."""
    return db.frame(
        """
        SELECT e.eval_run_id, e.started_at, m.system, m.k, m.metric, m.n, m.value, m.ci_low, m.ci_high
        FROM eval_metrics m JOIN eval_runs e USING (eval_run_id)
        WHERE e.benchmark_id = ? AND m.group_by = 'all'
        ORDER BY e.started_at, e.eval_run_id, m.system, m.k, m.metric""",
        [benchmark_id],
    )


def system_evaluations(db: Db, benchmark_id: str) -> pl.DataFrame:
    """Every (evaluation, system) of a benchmark with what makes rows comparable and their provenance
    (``clonemem.warehouse.leaderboard.system_evaluations``: the command line and the artifact read the same)."""
    return W.system_evaluations(db.frame, benchmark_id)


def system_metrics(db: Db, pairs: list[tuple[str, str]], group_by: str = "all") -> pl.DataFrame:
    """The aggregated metrics of (evaluation, system) pairs (``warehouse.leaderboard.system_metrics``)."""
    return W.system_metrics(db.frame, pairs, group_by)


def protocol_metrics(db: Db, pairs: list[tuple[str, str]]) -> pl.DataFrame:
    """Every standard protocol's per-group figures of (evaluation, system) pairs
    (``warehouse.leaderboard.protocol_metrics``; empty before migration 0024)."""
    return W.protocol_metrics(db.frame, pairs, None)


def eval_identities(db: Db, benchmark_id: str, table_columns: list[str]) -> pl.DataFrame:
    """Per evaluation of a benchmark, newest first: its provenance (JSON text, NULL where not recorded) and a
    digest of every figure it stored, so evaluations with the same numbers from the same code can be told
    apart from different ones (``table_columns``: ``eval_runs``'s columns in this warehouse)."""
    prov = "e.provenance_json::VARCHAR" if "provenance_json" in table_columns else "NULL::VARCHAR"
    return db.frame(
        f"""
        WITH figures AS (
            SELECT eval_run_id, md5(string_agg(concat_ws('|', system, k, group_by, group_value, metric, n, value,
                                                         ci_low, ci_high), ','
                                    ORDER BY system, k, group_by, group_value, metric)) AS figures
            FROM eval_metrics WHERE eval_run_id IN (SELECT eval_run_id FROM eval_runs WHERE benchmark_id = $b)
            GROUP BY ALL)
        SELECT e.eval_run_id, e.started_at, {prov} AS provenance_json, f.figures
        FROM eval_runs e LEFT JOIN figures f USING (eval_run_id)
        WHERE e.benchmark_id = $b ORDER BY e.started_at DESC, e.eval_run_id DESC""",
        {"b": benchmark_id},
    )


# -- calls -----------------------------------------------------------------------------------------------


def _call_texts(
    call_columns: list[str], columns: tuple[str, ...] = ("item", "prompt_text", "response_text")
) -> str:
    """Select-list items for these columns of ``llm_calls`` as text (NULL in a warehouse older than
    migration 0018, which added them)."""
    return ", ".join(
        f"c.{c}::VARCHAR AS {c}" if c in call_columns else f"NULL::VARCHAR AS {c}" for c in columns
    )


def call_runs(db: Db, benchmark_id: str | None) -> pl.DataFrame:
    """The runs that made LLM calls (of one benchmark, or all of them), newest first, with their calls."""
    return db.frame(
        f"""
        WITH rb AS ({_RUN_BENCHMARKS})
        SELECT c.run_id, any_value(b.name) AS benchmark, min(c.started_at) AS first_call, count(*) AS calls,
               count(*) FILTER (WHERE c.outcome <> 'ok') AS failed_calls
        FROM llm_calls c LEFT JOIN rb USING (run_id) LEFT JOIN benchmarks b USING (benchmark_id)
        WHERE $b IS NULL OR rb.benchmark_id = $b
        GROUP BY ALL ORDER BY first_call DESC""",
        {"b": benchmark_id},
    )


def calls(
    db: Db,
    run_ids: list[str],
    stages: list[str] | None,
    outcomes: list[str] | None,
    call_columns: list[str],
    limit: int = 500,
) -> pl.DataFrame:
    """LLM calls of the given runs, optionally of some stages and outcomes only, newest first: at most
    ``limit`` rows; ``matching`` (the same on every row) counts them all. ``call_columns``: ``llm_calls``'s
    columns in this warehouse."""
    # whether a prompt is stored, not the prompt: reading every matching call's text (200 MB on the
    # benchmark warehouse) to list 500 of them took most of the page's time
    stored = "c.prompt_text IS NOT NULL" if "prompt_text" in call_columns else "false"
    return db.frame(
        f"""
        WITH c AS (
            SELECT c.call_id, c.started_at, c.run_id, c.stage, c.role, c.provider, c.model, c.outcome, c.attempts,
                   c.input_tokens, c.output_tokens, c.cost_usd, c.latency_ms, c.error,
                   {_call_texts(call_columns, ("item",))}, {stored} AS stored
            FROM llm_calls c
            WHERE list_contains($runs, c.run_id) AND ($stages IS NULL OR list_contains($stages, c.stage))
              AND ($outcomes IS NULL OR list_contains($outcomes, c.outcome)))
        SELECT call_id, started_at, run_id, stage, role, provider || '/' || model AS model, outcome, attempts,
               input_tokens, output_tokens, cost_usd, round(latency_ms, 2) AS latency_ms,
               json_extract_string(item, '$.question_id') AS question_id, json_extract_string(item, '$.system') AS system,
               TRY_CAST(json_extract_string(item, '$.k') AS INTEGER) AS k, stored,
               error, count(*) OVER () AS matching
        FROM c ORDER BY started_at DESC, call_id LIMIT $limit""",
        {"runs": run_ids, "stages": stages, "outcomes": outcomes, "limit": limit},
    )


def call_stage_outcomes(db: Db, run_ids: list[str]) -> pl.DataFrame:
    """Calls of the given runs per stage and outcome."""
    return db.frame(
        """
        SELECT stage, outcome, count(*) AS calls FROM llm_calls WHERE list_contains(?, run_id)
        GROUP BY ALL ORDER BY stage, outcome""",
        [run_ids],
    )


def call(db: Db, call_id: str, call_columns: list[str]) -> pl.DataFrame:
    """One call in full: its accounting, what it was about, and its prompt and reply where stored."""
    return db.frame(
        f"""
        SELECT c.call_id, c.started_at, c.run_id, c.stage, c.role, c.provider, c.model, c.is_offline, c.outcome,
               c.attempts, c.error, {_call_texts(call_columns)}
        FROM llm_calls c WHERE c.call_id = ?""",
        [call_id],
    )


def question_calls(
    db: Db, eval_run_id: str, question_id: str, k: int, call_columns: list[str]
) -> pl.DataFrame:
    """The LLM calls an evaluation's figures for one question at k came from, per system: the answerer's and
    judge's (labelled with the question, system and k) and the retrieval step's (question and system). Each
    step's calls are this evaluation's own where it made them, else those of the latest run before it ended
    (a step served from the cache carries an earlier run's calls). Empty before migration 0018."""
    if "item" not in call_columns:
        return pl.DataFrame()
    return db.frame(
        f"""
        WITH until AS (SELECT coalesce(finished_at, TIMESTAMP '9999-12-31') AS t FROM eval_runs WHERE eval_run_id = $e),
        c AS (
            SELECT c.call_id, c.started_at, c.run_id, c.stage, c.role, c.provider || '/' || c.model AS model,
                   c.outcome, c.attempts, c.error, json_extract_string(c.item, '$.system') AS system,
                   json_extract(c.item, '$.k') IS NULL AS retrieval_step, c.run_id = $e AS this_run,
                   {_call_texts(call_columns, ("prompt_text", "response_text"))}
            FROM llm_calls c
            WHERE c.item IS NOT NULL AND json_extract_string(c.item, '$.question_id') = $q
              AND (json_extract(c.item, '$.k') IS NULL OR TRY_CAST(json_extract_string(c.item, '$.k') AS INTEGER) = $k)
              AND c.started_at <= (SELECT t FROM until)),
        chosen AS (SELECT DISTINCT ON (system, retrieval_step) system, retrieval_step, run_id FROM c
                   ORDER BY system, retrieval_step, this_run DESC, started_at DESC)
        SELECT c.system, c.stage, c.role, c.model, c.outcome, c.attempts, c.error, c.this_run, c.run_id, c.call_id,
               c.started_at, c.prompt_text, c.response_text
        FROM c JOIN chosen USING (system, retrieval_step, run_id)
        ORDER BY c.system, c.retrieval_step DESC, c.started_at, c.call_id""",
        {"e": eval_run_id, "q": question_id, "k": k},
    )
