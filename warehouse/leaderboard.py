"""What a benchmark's leaderboard across evaluations reads (``clonemem/evaluation/leaderboard.py`` ranks
and groups it): every (evaluation, system) of the benchmark with what decides comparability, their
aggregated metrics, and their per-question scores and retrievals for ``compare`` and ``--failures``.

Each reader is one SQL query run through ``query`` — ``Warehouse`` (``wh_query``) for the command line
and Prefect, the dashboard's guarded read-only connection (``GuardedConnection.frame``) for the page —
so the CLI, the artifact and the page read the same rows. Columns a migration added later are read as
NULL from a warehouse that does not have them yet (``columns``: ``eval_runs``' and
``eval_system_stats``' columns).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence

import polars as pl

from clonemem.warehouse.db import Warehouse

Params = Sequence[object] | Mapping[str, object]
Query = Callable[[str, Params], pl.DataFrame]


def wh_query(wh: Warehouse) -> Query:
    """``query`` over a warehouse connection."""

    def run(sql: str, params: Params) -> pl.DataFrame:
        with wh._lock:
            cursor = wh.con.execute(sql, params)
            columns = [d[0] for d in cursor.description]
            return pl.DataFrame(
                cursor.fetchall(), schema=columns, orient="row", infer_schema_length=None
            )

    return run


def table_columns(query: Query, table: str) -> list[str]:
    got = query(
        "SELECT column_name AS c FROM information_schema.columns WHERE table_schema = 'main' "
        "AND table_name = ?",
        [table],
    )
    return got["c"].to_list() if got.height else []


def _col(alias: str, name: str, have: Collection[str], cast: str = "VARCHAR") -> str:
    return f"{alias}.{name}::{cast}" if name in have else f"NULL::{cast}"


def system_evaluations(query: Query, benchmark_id: str) -> pl.DataFrame:
    """One row per (evaluation, system) of the benchmark, oldest first: when, how the system was fed
    (``retrieval_mode``), the content digest, the quick run's sample, the provenance and config (JSON
    text) and whether the answers came from the offline answerer."""
    runs, stats = table_columns(query, "eval_runs"), table_columns(query, "eval_system_stats")
    return query(
        f"""
        SELECT e.eval_run_id, e.started_at, s.system,
               {_col("s", "retrieval_mode", stats)} AS retrieval_mode,
               {_col("e", "content_hash", runs)} AS content_hash,
               {_col("e", "sample_json", runs)} AS sample_json,
               {_col("e", "provenance_json", runs)} AS provenance_json,
               e.config_json::VARCHAR AS config_json,
               (SELECT bool_or(a.is_offline) FROM eval_answers a
                 WHERE a.eval_run_id = e.eval_run_id AND a.system = s.system) AS answers_offline
        FROM eval_runs e JOIN eval_system_stats s USING (eval_run_id)
        WHERE e.benchmark_id = $b
        ORDER BY e.started_at, e.eval_run_id, s.system""",
        {"b": benchmark_id},
    )


def system_metrics(
    query: Query, pairs: Sequence[tuple[str, str]], group_by: str = "all"
) -> pl.DataFrame:
    """The aggregated metrics (with 95% intervals) of the given (evaluation, system) pairs, for one
    grouping (``all``, ``question_type``, ...)."""
    runs = sorted({e for e, _ in pairs})
    wanted = [f"{e}\x1f{s}" for e, s in pairs]
    return query(
        """
        SELECT eval_run_id, system, k, group_value, metric, n, value, ci_low, ci_high FROM eval_metrics
        WHERE list_contains($runs, eval_run_id) AND group_by = $g
          AND list_contains($wanted, eval_run_id || chr(31) || system)
        ORDER BY eval_run_id, system, k, group_value, metric""",
        {"runs": runs, "g": group_by, "wanted": wanted},
    )


def question_scores(query: Query, pairs: Sequence[tuple[str, str]], k: int) -> pl.DataFrame:
    """Per-question scores at k of the given (evaluation, system) pairs, with each question's type and
    text (the rows ``compare`` pairs up by question)."""
    wanted = [f"{e}\x1f{s}" for e, s in pairs]
    return query(
        """
        SELECT s.*, q.question_type, q.external_id, q.question
        FROM eval_question_scores s JOIN questions q USING (question_id)
        WHERE s.k = $k AND list_contains($wanted, s.eval_run_id || chr(31) || s.system)
        ORDER BY q.question_id""",
        {"k": k, "wanted": wanted},
    )


def missed_questions(
    query: Query, eval_run_id: str, system: str, k: int, limit: int
) -> pl.DataFrame:
    """The questions ``system`` missed at k in one evaluation (recall_flat below 1, or a wrong choice),
    worst first, each with its gold trace ids, what it retrieved (release ids and item texts), its
    choice and the right one, and its diagnosis."""
    return query(
        """
        WITH s AS (
            SELECT * FROM eval_question_scores
            WHERE eval_run_id = $e AND system = $s AND k = $k
              AND (coalesce(recall_flat, 1) < 1 OR coalesce(choice_accuracy, 1) < 1)),
        gold AS (
            SELECT qe.question_id, list(DISTINCT t.external_id ORDER BY t.external_id) AS gold
            FROM question_evidence qe JOIN evidence_traces et USING (evidence_id)
                 JOIN traces t ON t.trace_id = et.trace_id
            WHERE qe.question_id IN (SELECT question_id FROM s) GROUP BY ALL)
        SELECT q.external_id, q.question_type, q.question, s.recall_flat, s.choice_accuracy,
               CASE WHEN s.write_failure = 1 THEN 'write' WHEN s.read_failure = 1 THEN 'read'
                    WHEN s.utilization_failure = 1 THEN 'use' WHEN s.correct = 1 THEN 'correct' END AS diagnosis,
               a.predicted_choice_id, q.correct_choice_id, coalesce(g.gold, []) AS gold,
               r.retrieved_trace_ids::VARCHAR AS retrieved, r.items::VARCHAR AS items
        FROM s JOIN questions q USING (question_id)
             LEFT JOIN gold g USING (question_id)
             LEFT JOIN eval_answers a ON a.eval_run_id = s.eval_run_id AND a.system = s.system
                  AND a.k = s.k AND a.question_id = s.question_id
             LEFT JOIN eval_retrievals r ON r.eval_run_id = s.eval_run_id AND r.system = s.system
                  AND r.question_id = s.question_id
        ORDER BY coalesce(s.recall_flat, 1), coalesce(s.choice_accuracy, 1), q.external_id
        LIMIT $limit""",
        {"e": eval_run_id, "s": system, "k": k, "limit": limit},
    )


def release_ids(query: Query, trace_ids: Sequence[str]) -> dict[str, str]:
    """Warehouse trace id -> release (external) id."""
    got = query(
        "SELECT trace_id, external_id FROM traces WHERE list_contains($t, trace_id)",
        {"t": list(trace_ids)},
    )
    return dict(zip(got["trace_id"].to_list(), got["external_id"].to_list())) if got.height else {}


def protocol_metrics(
    query: Query, pairs: Sequence[tuple[str, str]], protocol: str | None
) -> pl.DataFrame:
    """The standard protocol's per-group figures (``eval_protocol_metrics``, migration 0024) of the given
    (evaluation, system) pairs (every protocol's when None), in ``ProtocolRow.merged``'s record form;
    empty where the warehouse has no such table or the evaluations no such rows."""
    if not table_columns(query, "eval_protocol_metrics"):
        return pl.DataFrame()
    wanted = [f"{e}\x1f{s}" for e, s in pairs]
    return query(
        """
        SELECT eval_run_id, protocol, protocol_version, system, k, granularity, group_name, category, metric, n,
               value, ci_low, ci_high
        FROM eval_protocol_metrics
        WHERE ($p IS NULL OR protocol = $p) AND list_contains($wanted, eval_run_id || chr(31) || system)
        ORDER BY eval_run_id, system, k, granularity, category NULLS LAST, group_name, metric""",
        {"p": protocol, "wanted": wanted},
    )
