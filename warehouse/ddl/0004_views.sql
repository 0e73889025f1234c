-- Views for common questions over the warehouse.

CREATE OR REPLACE VIEW v_benchmarks AS
SELECT b.benchmark_id AS id, b.name, b.source, b.gate_status, b.is_offline,
       (SELECT count(*) FROM personas p WHERE p.benchmark_id = b.benchmark_id) AS personas,
       (SELECT count(*) FROM traces t JOIN personas p USING (persona_id)
         WHERE p.benchmark_id = b.benchmark_id) AS traces,
       (SELECT count(*) FROM questions q WHERE q.benchmark_id = b.benchmark_id) AS questions
FROM benchmarks b;

-- Benchmark composition by question type and dimension.
CREATE OR REPLACE VIEW v_question_composition AS
SELECT b.name AS benchmark, q.question_type, q.question_type_known, q.dimension,
       count(*) AS questions,
       count(*) FILTER (WHERE q.correct_choice_id IS NOT NULL) AS multiple_choice
FROM questions q JOIN benchmarks b USING (benchmark_id)
GROUP BY ALL;

-- Benchmark composition by trace medium.
CREATE OR REPLACE VIEW v_trace_media AS
SELECT b.name AS benchmark, t.medium, count(*) AS traces,
       count(*) FILTER (WHERE t.is_noise) AS noise_traces,
       sum(length(t.content)) AS characters
FROM traces t JOIN personas p USING (persona_id) JOIN benchmarks b USING (benchmark_id)
GROUP BY ALL;

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
