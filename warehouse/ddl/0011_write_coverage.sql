-- Write coverage per evaluated system (SPEC §5): the share of the benchmark's traces its stored memory
-- represents, with provenance; NULL for a system that cannot list what it stores.
ALTER TABLE eval_system_stats ADD COLUMN write_coverage DOUBLE;
