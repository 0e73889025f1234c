-- What the field's benchmarks say of a turn and a question beyond the release's core fields
-- (LoCoMo, LongMemEval, PersonaMem), so their standard protocols and memory systems can read them.

-- A source's own category as text: LoCoMo's numbers ('1'..'5'), LongMemEval's and PersonaMem's
-- question_type labels ('temporal-reasoning', 'recall_user_shared_facts', ...). NULL: none.
ALTER TABLE questions ALTER COLUMN source_category SET DATA TYPE VARCHAR USING CAST(source_category AS VARCHAR);
-- The sessions holding the answer (LongMemEval `answer_session_ids`), a JSON list of session keys.
ALTER TABLE questions ADD COLUMN evidence_sessions JSON;

-- The source's session of a turn: LongMemEval's haystack session id, LoCoMo's `session_N`,
-- PersonaMem's shared context id; NULL where the source has no sessions (a generated trace).
ALTER TABLE traces ADD COLUMN session_key VARCHAR;
-- Who wrote the turn: a LoCoMo speaker name; `user` / `assistant` (LongMemEval, PersonaMem).
ALTER TABLE traces ADD COLUMN speaker VARCHAR;
-- The session's own date (LoCoMo `session_N_date_time`, LongMemEval `haystack_dates`); the turn's
-- event_date is this plus the turn's spacing inside the session.
ALTER TABLE traces ADD COLUMN session_date TIMESTAMP;
-- Images shared with the turn: a JSON list of {"caption", "url"} (LoCoMo blip_caption / img_url).
ALTER TABLE traces ADD COLUMN attachments JSON;

-- A text stored once however many traces hold it: the same LongMemEval session recurs in many
-- instances (scopes). A trace with a text_id holds '' in content; v_traces reads the text back.
CREATE TABLE trace_texts (
    text_id  VARCHAR PRIMARY KEY,       -- stable_hash of the content (content-addressed)
    content  VARCHAR NOT NULL
);
ALTER TABLE traces ADD COLUMN text_id VARCHAR;  -- NULL: the text is in traces.content
