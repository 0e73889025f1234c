-- Evaluation (SPEC §5): per-question retrievals, answers, judge verdicts, metrics and aggregates.

CREATE TABLE eval_runs (
    eval_run_id    VARCHAR PRIMARY KEY,
    benchmark_id   VARCHAR NOT NULL,
    run_id         VARCHAR,
    forced         BOOLEAN NOT NULL DEFAULT FALSE,
    config_json    JSON,
    started_at     TIMESTAMP NOT NULL,
    finished_at    TIMESTAMP
);

CREATE TABLE eval_retrievals (
    eval_run_id    VARCHAR NOT NULL,
    system         VARCHAR NOT NULL,
    question_id    VARCHAR NOT NULL,
    retrieved_trace_ids JSON NOT NULL,           -- in rank order, may repeat (items from one trace)
    latency_ms     DOUBLE,
    PRIMARY KEY (eval_run_id, system, question_id)
);

CREATE TABLE eval_answers (
    eval_run_id         VARCHAR NOT NULL,
    system              VARCHAR NOT NULL,
    k                   INTEGER NOT NULL,
    question_id         VARCHAR NOT NULL,
    context_tokens      BIGINT,
    answer_text         VARCHAR,
    predicted_choice_id VARCHAR,
    is_offline          BOOLEAN NOT NULL,
    PRIMARY KEY (eval_run_id, system, k, question_id)
);

CREATE TABLE eval_judgments (
    eval_run_id    VARCHAR NOT NULL,
    system         VARCHAR NOT NULL,
    k              INTEGER NOT NULL,
    question_id    VARCHAR NOT NULL,
    metric         VARCHAR NOT NULL,             -- qa_consistency, mem_recall, mem_helpful
    score          DOUBLE,                       -- NULL when unscored
    scored         BOOLEAN NOT NULL,
    reason         VARCHAR,
    PRIMARY KEY (eval_run_id, system, k, question_id, metric)
);

CREATE TABLE eval_question_metrics (
    eval_run_id    VARCHAR NOT NULL,
    system         VARCHAR NOT NULL,
    k              INTEGER NOT NULL,
    question_id    VARCHAR NOT NULL,
    metric         VARCHAR NOT NULL,
    value          DOUBLE,                       -- NULL where not computed
    PRIMARY KEY (eval_run_id, system, k, question_id, metric)
);

CREATE TABLE eval_system_stats (
    eval_run_id       VARCHAR NOT NULL,
    system            VARCHAR NOT NULL,
    build_seconds     DOUBLE,
    retrieval_p50_ms  DOUBLE,
    retrieval_p95_ms  DOUBLE,
    llm_calls         BIGINT,
    llm_tokens        BIGINT,
    PRIMARY KEY (eval_run_id, system)
);

CREATE TABLE eval_metrics (
    eval_run_id    VARCHAR NOT NULL,
    system         VARCHAR NOT NULL,
    k              INTEGER NOT NULL,
    group_by       VARCHAR NOT NULL,             -- all, persona, question_type, dimension
    group_value    VARCHAR NOT NULL,
    metric         VARCHAR NOT NULL,
    n              BIGINT NOT NULL,
    value          DOUBLE,
    ci_low         DOUBLE,
    ci_high        DOUBLE,
    PRIMARY KEY (eval_run_id, system, k, group_by, group_value, metric)
);
