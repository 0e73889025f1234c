-- The field's standard protocols (issue 28), computed beside the CloneMem metrics of one
-- evaluation: `locomo`, `mem0`, `longmemeval`, `personamem`. Every row names the protocol and the
-- version of its rules (clonemem/evaluation/protocols/), so figures made under other rules are told apart.
--
-- `granularity` is 'qa' for answer scores (F1, BLEU-1, a judge's accuracy, multiple-choice accuracy),
-- 'turn' or 'session' for LongMemEval's retrieval scores; `k` is the evaluation's k for 'qa' rows and
-- the retrieval cut-off for the others.

-- One row per (evaluation, protocol, system, k, granularity, question, metric); value NULL: unscored
-- (a judge reply that could not be read), with the reason.
CREATE TABLE eval_protocol_scores (
    eval_run_id       VARCHAR NOT NULL,
    protocol          VARCHAR NOT NULL,
    protocol_version  VARCHAR NOT NULL,
    system            VARCHAR NOT NULL,
    k                 INTEGER NOT NULL,
    granularity       VARCHAR NOT NULL,
    question_id       VARCHAR NOT NULL,
    metric            VARCHAR NOT NULL,
    value             DOUBLE,
    reason            VARCHAR,
    PRIMARY KEY (eval_run_id, protocol, system, k, granularity, question_id, metric)
);

-- What each protocol scored: its answerer's reply (or the prediction given in a file) and its judge's
-- label, per (evaluation, protocol, system, k, question).
CREATE TABLE eval_protocol_answers (
    eval_run_id       VARCHAR NOT NULL,
    protocol          VARCHAR NOT NULL,
    system            VARCHAR NOT NULL,
    k                 INTEGER NOT NULL,
    question_id       VARCHAR NOT NULL,
    answer_text       VARCHAR,
    judge_label       VARCHAR,
    judge_reason      VARCHAR,
    given             BOOLEAN NOT NULL,  -- the answer came from a predictions file, not the answerer
    PRIMARY KEY (eval_run_id, protocol, system, k, question_id)
);

-- One row per reported group: a LoCoMo category by name (with its number), a question type,
-- `overall`, `overall_with_adversarial`, `task_average`, `abstention`, `non_abstention`; the mean over
-- the group's scored questions, their count and the 95% bootstrap interval.
CREATE TABLE eval_protocol_metrics (
    eval_run_id       VARCHAR NOT NULL,
    protocol          VARCHAR NOT NULL,
    protocol_version  VARCHAR NOT NULL,
    system            VARCHAR NOT NULL,
    k                 INTEGER NOT NULL,
    granularity       VARCHAR NOT NULL,
    group_name        VARCHAR NOT NULL,
    category          INTEGER,
    metric            VARCHAR NOT NULL,
    n                 INTEGER NOT NULL,
    value             DOUBLE,
    ci_low            DOUBLE,
    ci_high           DOUBLE,
    PRIMARY KEY (eval_run_id, protocol, system, k, granularity, group_name, metric)
);
