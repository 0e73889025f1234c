-- Benchmark lifecycle. A benchmark is `complete` only when all its stages landed: for a generated
-- one, every persona (stages I-III), stage IV and a gate verdict; an import lands in one
-- transaction, so it is complete when it commits. Landing new content sets `incomplete` (in the
-- same transaction) and the gate's verdict sets `complete`. Readers list complete benchmarks;
-- `clonemem benchmarks --all` shows the incomplete ones (resumable by re-running, or `clonemem drop`).
ALTER TABLE benchmarks ADD COLUMN status VARCHAR DEFAULT 'complete';

UPDATE benchmarks
SET status = CASE WHEN source = 'generated' AND gate_status = 'pending' THEN 'incomplete' ELSE 'complete' END;

CREATE OR REPLACE VIEW v_benchmarks AS
SELECT b.benchmark_id AS id, b.name, b.source, b.gate_status, b.is_offline,
       (SELECT count(*) FROM personas p WHERE p.benchmark_id = b.benchmark_id) AS personas,
       (SELECT count(*) FROM traces t JOIN personas p USING (persona_id)
         WHERE p.benchmark_id = b.benchmark_id) AS traces,
       (SELECT count(*) FROM questions q WHERE q.benchmark_id = b.benchmark_id) AS questions,
       coalesce(b.status, 'complete') AS status
FROM benchmarks b;
