-- One row per benchmark: source, gate verdict, lifecycle status and its size.
CREATE OR REPLACE VIEW v_benchmarks AS
SELECT b.benchmark_id AS id, b.name, b.source, b.gate_status, b.is_offline,
       (SELECT count(*) FROM personas p WHERE p.benchmark_id = b.benchmark_id) AS personas,
       (SELECT count(*) FROM traces t JOIN personas p USING (persona_id)
         WHERE p.benchmark_id = b.benchmark_id) AS traces,
       (SELECT count(*) FROM questions q WHERE q.benchmark_id = b.benchmark_id) AS questions,
       coalesce(b.status, 'complete') AS status
FROM benchmarks b;
