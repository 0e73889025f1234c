-- What each persona's landed stage-IV output hashes to: a QA re-run that changes nothing writes nothing.
CREATE TABLE qa_landings (
    persona_id     VARCHAR PRIMARY KEY,
    benchmark_id   VARCHAR NOT NULL,
    content_hash   VARCHAR NOT NULL,
    summary        JSON
);
