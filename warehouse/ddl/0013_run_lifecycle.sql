-- Runs have a lifecycle (warehouse/runs.py): a row is `running` from the run's first LLM call and ends
-- `completed`, `failed` (with `error`), `interrupted` (Ctrl-C, or found still `running` by the next
-- run of its kind and benchmark: its process died) or `budget` (stopped at --max-cost). A run that
-- takes over an unfinished one names it in `resumed_from`. DuckDB cannot change a CHECK constraint
-- in place, so the table is rebuilt with its rows.
CREATE TABLE runs_lifecycle (
    run_id         VARCHAR PRIMARY KEY,
    kind           VARCHAR NOT NULL,             -- import, generate, qa, gate, evaluate, pipeline
    benchmark_id   VARCHAR,
    flow_run_id    VARCHAR,
    status         VARCHAR NOT NULL CHECK (status IN ('running', 'completed', 'failed', 'interrupted', 'budget')),
    started_at     TIMESTAMP NOT NULL,
    finished_at    TIMESTAMP,
    config_json    JSON,
    summary_json   JSON,
    deployment_id  VARCHAR,
    resumed_from   VARCHAR,
    error          VARCHAR
);

INSERT INTO runs_lifecycle (run_id, kind, benchmark_id, flow_run_id, status, started_at, finished_at, config_json,
                            summary_json, deployment_id)
SELECT run_id, kind, benchmark_id, flow_run_id, status, started_at, finished_at, config_json, summary_json,
       deployment_id
FROM runs;

DROP TABLE runs;
ALTER TABLE runs_lifecycle RENAME TO runs;
