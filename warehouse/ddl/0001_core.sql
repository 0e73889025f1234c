-- Core schema: benchmarks, the generation graph of SPEC §3, QA items, runs and LLM calls.
-- Integrity between tables is checked by the import validator and the GX gate rather than by
-- FOREIGN KEY constraints: DuckDB forbids updating or replacing rows that a foreign key
-- references, which would defeat idempotent upserts.
-- Content tables hold no wall-clock values, so equal inputs give equal rows.
-- Natural keys (benchmark name, a persona's person_id, a trace's release id) are unique because
-- the primary keys are uuid5s of paths made of them.

CREATE TABLE benchmarks (
    benchmark_id   VARCHAR PRIMARY KEY,          -- content_id("benchmark", name)
    name           VARCHAR NOT NULL,             -- unique: the id is derived from it
    source         VARCHAR NOT NULL CHECK (source IN ('generated', 'imported')),
    is_offline     BOOLEAN NOT NULL,             -- any content written by the offline provider
    language       VARCHAR,
    config_json    JSON,                         -- generation config (generated) or import options
    gate_status    VARCHAR NOT NULL DEFAULT 'pending'
                   CHECK (gate_status IN ('pending', 'passed', 'failed', 'skipped'))
);

CREATE TABLE personas (
    persona_id       VARCHAR PRIMARY KEY,        -- content_id("benchmark", name, "persona", person_key)
    benchmark_id     VARCHAR NOT NULL,
    person_key       VARCHAR NOT NULL,           -- release `person_id`
    seq              INTEGER NOT NULL,           -- order within the benchmark
    person_name      VARCHAR NOT NULL,
    language         VARCHAR,
    big_five         JSON,                       -- {"openness": 0.7, ...}
    profile          JSON,                       -- enriched profile (age, gender, occupation, ...)
    narrative        VARCHAR,                    -- life before the timeline
    timeline_start   TIMESTAMP,
    timeline_end     TIMESTAMP,
    source_file      VARCHAR                     -- file name for imported personas
);

CREATE TABLE relations (
    relation_id    VARCHAR PRIMARY KEY,
    persona_id     VARCHAR NOT NULL,
    seq            INTEGER NOT NULL,
    name           VARCHAR NOT NULL,
    relation_type  VARCHAR NOT NULL,             -- family, partner, colleague, friend, ...
    description    VARCHAR
);

CREATE TABLE event_seeds (
    seed_id        VARCHAR PRIMARY KEY,
    persona_id     VARCHAR NOT NULL,
    seq            INTEGER NOT NULL,
    concept        VARCHAR NOT NULL,
    origin         VARCHAR NOT NULL CHECK (origin IN ('pool', 'persona')),
    rationale      VARCHAR
);

CREATE TABLE life_arcs (
    arc_id         VARCHAR PRIMARY KEY,
    persona_id     VARCHAR NOT NULL,
    seq            INTEGER NOT NULL,
    dimension      VARCHAR NOT NULL CHECK (dimension IN ('experience', 'emotion', 'opinion')),
    title          VARCHAR NOT NULL,
    description    VARCHAR,
    seed_id        VARCHAR
);

CREATE TABLE arc_anchor_states (
    arc_id         VARCHAR NOT NULL,
    idx            INTEGER NOT NULL,
    state          VARCHAR NOT NULL,
    trigger_logic  VARCHAR,
    behavioural_cues VARCHAR,
    PRIMARY KEY (arc_id, idx)
);

CREATE TABLE major_events (
    major_event_id VARCHAR PRIMARY KEY,
    persona_id     VARCHAR NOT NULL,
    seq            INTEGER NOT NULL,
    event_date     TIMESTAMP NOT NULL,
    title          VARCHAR NOT NULL,
    description    VARCHAR
);

CREATE TABLE major_event_arcs (
    major_event_id VARCHAR NOT NULL,
    arc_id         VARCHAR NOT NULL,
    anchor_idx     INTEGER NOT NULL,             -- anchor state the arc occupies at the event
    PRIMARY KEY (major_event_id, arc_id)
);

CREATE TABLE snapshots (
    snapshot_id       VARCHAR PRIMARY KEY,
    persona_id        VARCHAR NOT NULL,
    seq               INTEGER NOT NULL,          -- position in the persona's carried chain
    energy            DOUBLE,
    stress            DOUBLE,
    dominant_emotion  VARCHAR,
    attentional_focus VARCHAR,
    arc_status        JSON                       -- {arc_id: status text}
);

CREATE TABLE phases (
    phase_id           VARCHAR PRIMARY KEY,
    major_event_id     VARCHAR NOT NULL,
    seq                INTEGER NOT NULL,
    start_date         TIMESTAMP NOT NULL,
    end_date           TIMESTAMP NOT NULL,
    title              VARCHAR NOT NULL,
    description        VARCHAR,
    snapshot_before_id VARCHAR NOT NULL,
    snapshot_after_id  VARCHAR NOT NULL
);

CREATE TABLE detailed_events (
    detailed_event_id VARCHAR PRIMARY KEY,
    phase_id          VARCHAR NOT NULL,
    seq               INTEGER NOT NULL,
    event_date        TIMESTAMP NOT NULL,
    title             VARCHAR NOT NULL,
    description       VARCHAR,
    people            JSON,                      -- names from relations
    place             VARCHAR
);

CREATE TABLE evidence (
    evidence_id       VARCHAR PRIMARY KEY,
    persona_id        VARCHAR NOT NULL,
    detailed_event_id VARCHAR,                   -- NULL for imported evidence
    seq               INTEGER NOT NULL,
    kind              VARCHAR CHECK (kind IS NULL OR kind IN ('fact', 'emotion', 'opinion')),
    statement         VARCHAR NOT NULL
);

CREATE TABLE evidence_arcs (
    evidence_id    VARCHAR NOT NULL,
    arc_id         VARCHAR NOT NULL,
    PRIMARY KEY (evidence_id, arc_id)
);

CREATE TABLE traces (
    trace_id          VARCHAR PRIMARY KEY,       -- content_id(persona path, "trace", external_id)
    persona_id        VARCHAR NOT NULL,
    external_id       VARCHAR NOT NULL,          -- release `id`
    seq               INTEGER NOT NULL,          -- order in the release `context` list
    medium            VARCHAR NOT NULL,
    event_date        TIMESTAMP NOT NULL,
    content           VARCHAR NOT NULL,
    detailed_event_id VARCHAR,                   -- NULL for noise and imported traces
    intent            VARCHAR,                   -- two-step writing, step 1
    audience          VARCHAR,
    key_information   JSON,
    is_noise          BOOLEAN NOT NULL DEFAULT FALSE
);

CREATE TABLE evidence_traces (
    evidence_id    VARCHAR NOT NULL,
    trace_id       VARCHAR NOT NULL,
    seq            INTEGER NOT NULL,             -- order in the evidence's trace-id list
    PRIMARY KEY (evidence_id, seq)
);

CREATE TABLE questions (
    question_id         VARCHAR PRIMARY KEY,
    benchmark_id        VARCHAR NOT NULL,
    persona_id          VARCHAR NOT NULL,
    external_id         VARCHAR NOT NULL,        -- release `id`
    seq                 INTEGER NOT NULL,
    question            VARCHAR NOT NULL,
    question_type       VARCHAR NOT NULL,
    question_type_known BOOLEAN NOT NULL,        -- one of the eight SPEC types
    dimension           VARCHAR NOT NULL,
    dimension_known     BOOLEAN NOT NULL,
    question_time       TIMESTAMP NOT NULL,
    answer              VARCHAR NOT NULL,
    correct_choice_id   VARCHAR,                 -- NULL for free-text-only items
    arc_id              VARCHAR,                 -- provenance (generated items)
    segment_id          VARCHAR,
    plan                JSON
);

CREATE TABLE question_evidence (
    question_id    VARCHAR NOT NULL,
    seq            INTEGER NOT NULL,
    evidence_id    VARCHAR NOT NULL,
    PRIMARY KEY (question_id, seq)
);

CREATE TABLE question_traces (
    question_id    VARCHAR NOT NULL,
    seq            INTEGER NOT NULL,
    trace_id       VARCHAR NOT NULL,             -- the item's `digital_trace_ids`
    PRIMARY KEY (question_id, seq)
);

CREATE TABLE question_choices (
    question_id    VARCHAR NOT NULL,
    seq            INTEGER NOT NULL,
    choice_id      VARCHAR NOT NULL,
    text           VARCHAR NOT NULL,
    PRIMARY KEY (question_id, seq)
);

-- Operational tables: these carry wall-clock times by nature.

CREATE TABLE runs (
    run_id         VARCHAR PRIMARY KEY,
    kind           VARCHAR NOT NULL,             -- import, generate, gate, evaluate, demo
    benchmark_id   VARCHAR,
    flow_run_id    VARCHAR,
    status         VARCHAR NOT NULL CHECK (status IN ('running', 'completed', 'failed')),
    started_at     TIMESTAMP NOT NULL,
    finished_at    TIMESTAMP,
    config_json    JSON,
    summary_json   JSON
);

CREATE TABLE llm_calls (
    call_id        VARCHAR PRIMARY KEY,
    run_id         VARCHAR,
    stage          VARCHAR NOT NULL,
    role           VARCHAR NOT NULL,
    provider       VARCHAR NOT NULL,
    model          VARCHAR NOT NULL,
    is_offline     BOOLEAN NOT NULL,
    prompt_hash    VARCHAR NOT NULL,
    input_tokens   BIGINT NOT NULL,
    output_tokens  BIGINT NOT NULL,
    cost_usd       DOUBLE,                       -- NULL when the model has no known price
    latency_ms     DOUBLE NOT NULL,
    attempts       INTEGER NOT NULL,
    outcome        VARCHAR NOT NULL CHECK (outcome IN ('ok', 'invalid_output', 'transient_error', 'permanent_error', 'disabled')),
    error          VARCHAR,
    started_at     TIMESTAMP NOT NULL
);
