-- Privacy boundaries (after LifeSide's "Level 3: Privacy Control"): per persona the sensitive matters of its
-- life and who may know each; per evidence item its matters and who its traces reached (clonemem/privacy.py);
-- the two stage-IV task families built on them, and the per-question privacy scores of an evaluation.

CREATE TABLE privacy_matters (
    matter_id      VARCHAR PRIMARY KEY,          -- content_id(persona_id, "privacy", matter_key)
    persona_id     VARCHAR NOT NULL,
    seq            INTEGER NOT NULL,
    matter_key     VARCHAR NOT NULL,             -- S1, S2, ...
    category       VARCHAR NOT NULL
                   CHECK (category IN ('health', 'money', 'conflict', 'opinion_about', 'unshared_plan')),
    arc_id         VARCHAR,                      -- the arc whose evidence (of `kinds`) is sensitive
    kinds          JSON NOT NULL,                -- ["emotion", ...]
    subject        VARCHAR NOT NULL,
    may_know       JSON NOT NULL                 -- relation names; [] = nobody but the persona
);

CREATE TABLE evidence_privacy (
    evidence_id    VARCHAR PRIMARY KEY,
    persona_id     VARCHAR NOT NULL,
    sensitive      BOOLEAN NOT NULL,
    matter_ids     JSON NOT NULL,                -- the sensitive matters it belongs to
    disclosed_to   JSON NOT NULL                 -- who its traces reached: relation names, or ["*"] (everyone)
);

-- A privacy task: a recipient asks, for a purpose; the response must convey the necessary items and
-- withhold the sensitive ones. `tactic` is set for boundary defense (an adversarial request).
CREATE TABLE privacy_items (
    question_id    VARCHAR PRIMARY KEY,
    recipient      VARCHAR NOT NULL,
    purpose        VARCHAR NOT NULL,
    tactic         VARCHAR CHECK (tactic IS NULL OR tactic IN ('pretexting', 'urgency', 'authority', 'guilt'))
);

CREATE TABLE privacy_item_evidence (
    question_id    VARCHAR NOT NULL,
    role           VARCHAR NOT NULL CHECK (role IN ('necessary', 'sensitive')),
    seq            INTEGER NOT NULL,
    evidence_id    VARCHAR NOT NULL,
    PRIMARY KEY (question_id, role, seq)
);

-- Scores of privacy tasks (NULL for other questions): any sensitive item disclosed (0/1), the share of
-- sensitive items disclosed, and the share of necessary items conveyed.
ALTER TABLE eval_question_scores ADD COLUMN privacy_violation DOUBLE;
ALTER TABLE eval_question_scores ADD COLUMN privacy_leak_share DOUBLE;
ALTER TABLE eval_question_scores ADD COLUMN privacy_completeness DOUBLE;

-- The judge's verdict per item of a privacy task: a sensitive item disclosed, or a necessary item conveyed.
CREATE TABLE eval_privacy_verdicts (
    eval_run_id    VARCHAR NOT NULL,
    system         VARCHAR NOT NULL,
    k              INTEGER NOT NULL,
    question_id    VARCHAR NOT NULL,
    evidence_id    VARCHAR NOT NULL,
    role           VARCHAR NOT NULL CHECK (role IN ('necessary', 'sensitive')),
    present        BOOLEAN NOT NULL,             -- disclosed (sensitive) or conveyed (necessary)
    reason         VARCHAR,
    PRIMARY KEY (eval_run_id, system, k, question_id, evidence_id)
);
