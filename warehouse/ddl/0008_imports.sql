-- Imported benchmarks keep what their source said, beside the project's own vocabulary.
-- questions.question_type holds one of the eight types when the source label maps to one
-- (the published CloneMem files say `inference` for `inferential`; LoCoMo has numbered categories).
ALTER TABLE questions ADD COLUMN source_question_type VARCHAR;  -- the label as the source file wrote it
ALTER TABLE questions ADD COLUMN source_category INTEGER;       -- LoCoMo category 1-5 (NULL elsewhere)
ALTER TABLE questions ADD COLUMN adversarial_answer VARCHAR;    -- LoCoMo category 5: the trap answer

-- What an import repaired or could not resolve (e.g. a LoCoMo evidence string naming two turns,
-- a turn id that does not exist), with the JSON path in the source file: reported, never dropped.
CREATE TABLE import_notes (
    benchmark_id   VARCHAR NOT NULL,
    persona_id     VARCHAR NOT NULL,
    seq            INTEGER NOT NULL,
    source_file    VARCHAR NOT NULL,
    json_path      VARCHAR NOT NULL,
    kind           VARCHAR NOT NULL,             -- split, normalised, unresolved, duplicate_turn, ...
    raw            VARCHAR,
    resolved       VARCHAR,                      -- what it became (NULL when unresolved)
    PRIMARY KEY (persona_id, seq)
);
