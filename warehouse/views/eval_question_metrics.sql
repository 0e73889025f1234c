-- Per-question metrics in long form (a row per metric, NULL where not computed): the wide table
-- eval_question_scores unpivoted. Its columns are the metric names of schemas/results.py (AGGREGATED).
CREATE OR REPLACE VIEW eval_question_metrics AS
SELECT eval_run_id, system, k, question_id, metric, value
FROM eval_question_scores UNPIVOT INCLUDE NULLS (value FOR metric IN (
    recall_flat, recall_all_all, recall_all_any, recall_any_all, recall_any_any, choice_accuracy,
    qa_consistency, qa_hallucination_rate, qa_perfect_rate, mem_recall, mem_helpful,
    write_failure, read_failure, utilization_failure, correct,
    privacy_violation, privacy_leak_share, privacy_completeness));
