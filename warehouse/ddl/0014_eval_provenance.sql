-- Where an evaluation's numbers came from (the project's version and git commit, each system's code
-- hash, stage models and extra provenance, the answerer and judge, key package versions, and the
-- aggregation that turned per-question scores into figures): schemas/results.py `Provenance` as JSON,
-- so two evaluations of the same system can be told apart (and compared) on the leaderboard.
ALTER TABLE eval_runs ADD COLUMN provenance_json JSON;
