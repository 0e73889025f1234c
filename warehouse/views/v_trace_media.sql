-- Benchmark composition by trace medium.
CREATE OR REPLACE VIEW v_trace_media AS
SELECT b.name AS benchmark, t.medium, count(*) AS traces,
       count(*) FILTER (WHERE t.is_noise) AS noise_traces,
       sum(length(coalesce(x.content, t.content))) AS characters
FROM traces t JOIN personas p USING (persona_id) JOIN benchmarks b USING (benchmark_id)
     LEFT JOIN trace_texts x ON x.text_id = t.text_id  -- a text stored once (v_traces)
GROUP BY ALL;
