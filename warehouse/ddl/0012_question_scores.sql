-- Per-question metrics, one row per (evaluation run, system, k, question) with a column per metric.
-- The long table (a row per metric) made an evaluation's landing transaction hold ~90 MB of rows and
-- primary-key index for 2k questions; this form holds a sixth of it. `eval_question_metrics` stays as a
-- view of the same rows and columns (views/eval_question_metrics.sql), so queries over it still work.
CREATE TABLE eval_question_scores (
    eval_run_id            VARCHAR NOT NULL,
    system                 VARCHAR NOT NULL,
    k                      INTEGER NOT NULL,
    question_id            VARCHAR NOT NULL,
    recall_flat            DOUBLE,
    recall_all_all         DOUBLE,
    recall_all_any         DOUBLE,
    recall_any_all         DOUBLE,
    recall_any_any         DOUBLE,
    choice_accuracy        DOUBLE,
    qa_consistency         DOUBLE,
    qa_hallucination_rate  DOUBLE,
    qa_perfect_rate        DOUBLE,
    mem_recall             DOUBLE,
    mem_helpful            DOUBLE,
    write_failure          DOUBLE,
    read_failure           DOUBLE,
    utilization_failure    DOUBLE,
    correct                DOUBLE,
    PRIMARY KEY (eval_run_id, system, k, question_id)
);

INSERT INTO eval_question_scores
SELECT eval_run_id, system, k, question_id,
       max(value) FILTER (WHERE metric = 'recall_flat') AS recall_flat,
       max(value) FILTER (WHERE metric = 'recall_all_all') AS recall_all_all,
       max(value) FILTER (WHERE metric = 'recall_all_any') AS recall_all_any,
       max(value) FILTER (WHERE metric = 'recall_any_all') AS recall_any_all,
       max(value) FILTER (WHERE metric = 'recall_any_any') AS recall_any_any,
       max(value) FILTER (WHERE metric = 'choice_accuracy') AS choice_accuracy,
       max(value) FILTER (WHERE metric = 'qa_consistency') AS qa_consistency,
       max(value) FILTER (WHERE metric = 'qa_hallucination_rate') AS qa_hallucination_rate,
       max(value) FILTER (WHERE metric = 'qa_perfect_rate') AS qa_perfect_rate,
       max(value) FILTER (WHERE metric = 'mem_recall') AS mem_recall,
       max(value) FILTER (WHERE metric = 'mem_helpful') AS mem_helpful,
       max(value) FILTER (WHERE metric = 'write_failure') AS write_failure,
       max(value) FILTER (WHERE metric = 'read_failure') AS read_failure,
       max(value) FILTER (WHERE metric = 'utilization_failure') AS utilization_failure,
       max(value) FILTER (WHERE metric = 'correct') AS correct
FROM eval_question_metrics
GROUP BY eval_run_id, system, k, question_id;

DROP TABLE eval_question_metrics;
