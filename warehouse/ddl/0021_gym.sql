-- On-policy evaluation (`clonemem gym`, the README's Gym section): one row per gym run with its
-- provenance (the `runs` row it belongs to, the config, models, code hashes), each persona's states per
-- period, the sessions and turns of every assistant's interaction, every answer at every evaluation
-- position (on- and off-policy) with its diagnosis, and the metrics (overall: position NULL).
CREATE TABLE gym_runs (
    gym_run_id       VARCHAR PRIMARY KEY,
    run_id           VARCHAR NOT NULL,           -- the `runs` row (kind 'gym') that paid for its calls
    config_name      VARCHAR NOT NULL,
    systems          JSON NOT NULL,              -- the systems asked for, in order
    reference        VARCHAR NOT NULL,           -- the assistant whose transcript is the off-policy history
    periods          INTEGER NOT NULL,           -- N_p
    states_per_question INTEGER NOT NULL,        -- N_s
    turns_per_exposure  INTEGER NOT NULL,        -- N_i
    exposure_rate    DOUBLE NOT NULL,            -- openings whose states the validator recovered (the gate)
    random_bound     DOUBLE NOT NULL,
    upper_bound      DOUBLE NOT NULL,
    config_json      JSON,
    provenance_json  JSON,
    report_json      JSON NOT NULL,              -- exactly what `clonemem gym --json` writes
    started_at       TIMESTAMP NOT NULL,
    finished_at      TIMESTAMP NOT NULL
);

CREATE TABLE gym_states (
    gym_run_id   VARCHAR NOT NULL,
    persona_id   VARCHAR NOT NULL,
    person_key   VARCHAR NOT NULL,
    period       INTEGER NOT NULL,
    period_date  DATE NOT NULL,
    event_title  VARCHAR NOT NULL,               -- the life event of the period
    variable     VARCHAR NOT NULL,
    label        VARCHAR NOT NULL,
    value        VARCHAR NOT NULL,
    changed      BOOLEAN NOT NULL,               -- differs from the period before
    PRIMARY KEY (gym_run_id, persona_id, period, variable)
);

CREATE TABLE gym_sessions (
    gym_run_id   VARCHAR NOT NULL,
    system       VARCHAR NOT NULL,
    persona_id   VARCHAR NOT NULL,
    period       INTEGER NOT NULL,
    session      INTEGER NOT NULL,
    opening      VARCHAR NOT NULL,               -- the state-bearing utterance that opened it
    exposed_json JSON NOT NULL,                  -- the states it was written to reveal
    recovered    BOOLEAN NOT NULL,               -- the validator read them all back
    turns        INTEGER NOT NULL,
    PRIMARY KEY (gym_run_id, system, persona_id, period, session)
);

CREATE TABLE gym_turns (
    gym_run_id   VARCHAR NOT NULL,
    system       VARCHAR NOT NULL,
    persona_id   VARCHAR NOT NULL,
    trace_id     VARCHAR NOT NULL,               -- what the memory stored it under
    period       INTEGER NOT NULL,
    session      INTEGER NOT NULL,
    turn         INTEGER NOT NULL,
    speaker      VARCHAR NOT NULL CHECK (speaker IN ('user', 'assistant')),
    text         VARCHAR NOT NULL,
    said_at      TIMESTAMP NOT NULL,
    PRIMARY KEY (gym_run_id, system, persona_id, trace_id)
);

CREATE TABLE gym_answers (
    gym_run_id   VARCHAR NOT NULL,
    system       VARCHAR NOT NULL,
    policy       VARCHAR NOT NULL CHECK (policy IN ('on', 'off')),
    persona_id   VARCHAR NOT NULL,
    position     INTEGER NOT NULL,
    question_id  VARCHAR NOT NULL,
    question     VARCHAR NOT NULL,
    choice_id    VARCHAR NOT NULL,
    correct_id   VARCHAR NOT NULL,
    correct      BOOLEAN NOT NULL,
    options      INTEGER NOT NULL,
    diagnosis    VARCHAR NOT NULL CHECK (diagnosis IN ('correct', 'write', 'read', 'use', 'unknown')),
    PRIMARY KEY (gym_run_id, system, policy, persona_id, position, question_id)
);

CREATE TABLE gym_metrics (
    gym_run_id   VARCHAR NOT NULL,
    system       VARCHAR NOT NULL,               -- a system, or '(bounds)' for metric random / upper
    policy       VARCHAR NOT NULL,
    position     INTEGER,                        -- NULL: over every position
    metric       VARCHAR NOT NULL,               -- accuracy, memory_score, write, read, use, unknown, random, upper, rank
    value        DOUBLE NOT NULL,
    ci_low       DOUBLE,
    ci_high      DOUBLE
);
