-- A benchmark's leaderboard across evaluations (clonemem/evaluation/leaderboard.py) needs to know, per
-- evaluation and system, what makes two rows comparable:
-- * `eval_system_stats.retrieval_mode`: how the system was fed its history, `replay` (before each question
--   it had seen the past only: chronological replay, or a build that provably retrieves the same) or
--   `in_process` (built once over the whole history, then filtered by time); NULL for older evaluations;
-- * `eval_runs.content_hash`: the digest of the benchmark's content as evaluated (personas, traces,
--   questions, evidence), before any sample was drawn; NULL for older evaluations;
-- * `eval_runs.sample_json`: the questions evaluated when not all were (`evaluate --limit N` or
--   `--sample N --seed S`): {"kind", "n", "seed", "questions", "of"}; NULL for a full evaluation.
ALTER TABLE eval_system_stats ADD COLUMN retrieval_mode VARCHAR;
ALTER TABLE eval_runs ADD COLUMN content_hash VARCHAR;
ALTER TABLE eval_runs ADD COLUMN sample_json JSON;
