-- LLM spend per run and stage.
CREATE OR REPLACE VIEW v_llm_spend AS
SELECT run_id, stage, role, provider, model, is_offline,
       count(*) AS calls,
       count(*) FILTER (WHERE outcome <> 'ok') AS failed_calls,
       sum(attempts) AS attempts,
       sum(input_tokens) AS input_tokens,
       sum(output_tokens) AS output_tokens,
       sum(cost_usd) AS cost_usd,
       median(latency_ms) AS median_latency_ms
FROM llm_calls
GROUP BY ALL;
