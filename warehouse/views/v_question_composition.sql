-- Benchmark composition by question type and dimension.
CREATE OR REPLACE VIEW v_question_composition AS
SELECT b.name AS benchmark, q.question_type, q.question_type_known, q.dimension,
       count(*) AS questions,
       count(*) FILTER (WHERE q.correct_choice_id IS NOT NULL) AS multiple_choice
FROM questions q JOIN benchmarks b USING (benchmark_id)
GROUP BY ALL;
