-- Benchmark composition by trace medium.
CREATE OR REPLACE VIEW v_trace_media AS
SELECT b.name AS benchmark, t.medium, count(*) AS traces,
       count(*) FILTER (WHERE t.is_noise) AS noise_traces,
       sum(length(t.content)) AS characters
FROM traces t JOIN personas p USING (persona_id) JOIN benchmarks b USING (benchmark_id)
GROUP BY ALL;
