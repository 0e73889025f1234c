-- One retry budget per LLM call, every attempt on record (issue 31). A call's row (one per logical call,
-- as before) now says what it ended with and keeps each of its attempts, failed ones included:
-- error_class: the class of the error the call ended with (NULL when it succeeded): timeout, connection,
--   rate_limited, server_error, http_NNN, invalid_output, rejected, unresponsive, budget, permanent...
-- attempt_log: a JSON list, one object per attempt: n, started_at, latency_ms, outcome, error_class, error.
-- The view v_llm_call_attempts gives one row per attempt. NULL: a call landed before this migration.
ALTER TABLE llm_calls ADD COLUMN error_class VARCHAR;
ALTER TABLE llm_calls ADD COLUMN attempt_log JSON;
