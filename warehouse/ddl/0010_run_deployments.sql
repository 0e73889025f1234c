-- Runs carry the Prefect deployment they ran from (flow-run ids are in runs.flow_run_id and are the
-- run ids themselves when a run is a flow run), so a scheduled run in Prefect's UI finds its rows.
ALTER TABLE runs ADD COLUMN deployment_id VARCHAR;
