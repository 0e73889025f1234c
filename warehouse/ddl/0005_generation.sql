-- Generation bookkeeping: what each persona's landed content hashes to (so a re-run that changes
-- nothing writes nothing), and the stage items that failed after their retries.

CREATE TABLE persona_landings (
    persona_id     VARCHAR PRIMARY KEY,
    benchmark_id   VARCHAR NOT NULL,
    content_hash   VARCHAR NOT NULL
);

CREATE TABLE generation_failures (
    run_id         VARCHAR NOT NULL,
    benchmark_id   VARCHAR NOT NULL,
    persona_key    VARCHAR NOT NULL,
    stage          VARCHAR NOT NULL,
    item           VARCHAR NOT NULL,
    error          VARCHAR NOT NULL,
    PRIMARY KEY (run_id, persona_key, stage, item)
);
