-- Every attempt of every LLM call, failed ones included, one row each (from llm_calls.attempt_log,
-- migration 0027), with the call's run, stage, role and model.
CREATE OR REPLACE VIEW v_llm_call_attempts AS
SELECT c.call_id, c.run_id, c.stage, c.role, c.provider, c.model,
       a.n::INTEGER AS attempt,
       a.started_at::TIMESTAMP AS started_at,
       a.latency_ms::DOUBLE AS latency_ms,
       a.outcome AS outcome,
       a.error_class AS error_class,
       a.error AS error
FROM llm_calls c,
     unnest(from_json(c.attempt_log, '[{"n": "INTEGER", "started_at": "VARCHAR", "latency_ms": "DOUBLE",
                                       "outcome": "VARCHAR", "error_class": "VARCHAR", "error": "VARCHAR"}]')) AS t(a)
WHERE c.attempt_log IS NOT NULL;
