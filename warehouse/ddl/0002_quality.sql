-- Stage IV provenance, quality control (SPEC §4) and the Great Expectations gate.

CREATE TABLE trajectory_segments (
    segment_id     VARCHAR PRIMARY KEY,
    persona_id     VARCHAR NOT NULL,
    arc_id         VARCHAR NOT NULL,
    window_idx     INTEGER NOT NULL,
    window_start   TIMESTAMP NOT NULL,
    window_end     TIMESTAMP NOT NULL,
    evidence_ids   JSON NOT NULL                 -- accumulated evidence up to window_end, in time order
);

-- Every quality-control verdict on an item, accepted or not; distractor checks have one row per round.
CREATE TABLE qa_checks (
    question_id    VARCHAR NOT NULL,
    check_name     VARCHAR NOT NULL,             -- format, sufficiency, distractor_blind, distractor_single_evidence
    round          INTEGER NOT NULL,
    passed         BOOLEAN NOT NULL,
    score          DOUBLE,
    verdict        VARCHAR,
    reason         VARCHAR,
    detail         JSON,
    PRIMARY KEY (question_id, check_name, round)
);

CREATE TABLE qa_distractor_rounds (
    question_id       VARCHAR NOT NULL,
    round             INTEGER NOT NULL,
    choices           JSON NOT NULL,             -- [{"id": "A", "text": ...}, ...]
    correct_choice_id VARCHAR NOT NULL,
    passed            BOOLEAN NOT NULL,
    PRIMARY KEY (question_id, round)
);

-- Items dropped by quality control, with the draft and the reason.
CREATE TABLE qa_rejected (
    question_id    VARCHAR PRIMARY KEY,
    persona_id     VARCHAR NOT NULL,
    segment_id     VARCHAR,
    question_type  VARCHAR,
    dimension      VARCHAR,
    stage          VARCHAR NOT NULL,             -- format, sufficiency, distractors
    reason         VARCHAR NOT NULL,
    draft          JSON
);

CREATE TABLE gate_runs (
    gate_run_id    VARCHAR PRIMARY KEY,
    benchmark_id   VARCHAR NOT NULL,
    run_id         VARCHAR,
    status         VARCHAR NOT NULL CHECK (status IN ('passed', 'failed', 'error')),
    started_at     TIMESTAMP NOT NULL,
    finished_at    TIMESTAMP,
    data_docs_path VARCHAR,
    summary        JSON
);

CREATE TABLE gate_results (
    gate_run_id      VARCHAR NOT NULL,
    suite            VARCHAR NOT NULL,
    expectation      VARCHAR NOT NULL,
    success          BOOLEAN NOT NULL,
    observed         JSON,
    unexpected_count BIGINT,
    failing_sample   JSON,
    PRIMARY KEY (gate_run_id, suite, expectation)
);
