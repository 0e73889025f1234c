-- Orphaned runs become visible (warehouse/runs.py): a run's row records the process that runs it (`host`,
-- `pid` and `process_start`, which tells a reused pid from the original: on Linux the boot id and the
-- process's start time), and a `running` row whose process is gone (killed, or its machine rebooted) is
-- marked `crashed` by the next run that begins on that warehouse, with what is known in `error`. A
-- process that stops on its own records how it ended (`completed`, `failed`, `interrupted`, `budget`).
-- DuckDB cannot change a CHECK constraint in place, so the table is rebuilt with its rows.
CREATE TABLE runs_owned (
    run_id         VARCHAR PRIMARY KEY,
    kind           VARCHAR NOT NULL,             -- import, generate, qa, gate, evaluate, pipeline
    benchmark_id   VARCHAR,
    flow_run_id    VARCHAR,
    status         VARCHAR NOT NULL CHECK (status IN ('running', 'completed', 'failed', 'interrupted', 'budget',
                                                      'crashed')),
    started_at     TIMESTAMP NOT NULL,
    finished_at    TIMESTAMP,
    config_json    JSON,
    summary_json   JSON,
    deployment_id  VARCHAR,
    resumed_from   VARCHAR,
    error          VARCHAR,
    host           VARCHAR,                      -- where the run's process ran (socket.gethostname())
    pid            INTEGER,
    process_start  VARCHAR                       -- Linux: '<boot id>:<start time in clock ticks>'
);

INSERT INTO runs_owned (run_id, kind, benchmark_id, flow_run_id, status, started_at, finished_at, config_json,
                        summary_json, deployment_id, resumed_from, error)
SELECT run_id, kind, benchmark_id, flow_run_id, status, started_at, finished_at, config_json, summary_json,
       deployment_id, resumed_from, error
FROM runs;

DROP TABLE runs;
ALTER TABLE runs_owned RENAME TO runs;
