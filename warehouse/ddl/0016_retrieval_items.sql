-- The retrieved items themselves, per (evaluation run, system, question), in rank order: each item's text,
-- trace ids and kind ([{"text": ..., "trace_ids": [...], "kind": ...}, ...]). `retrieved_trace_ids` alone
-- cannot show what the answerer and the judge read; with the items a stored run can be exported as a
-- results file (`clonemem export-retrievals`) and scored again to the same metrics. NULL for older runs.
ALTER TABLE eval_retrievals ADD COLUMN items JSON;
