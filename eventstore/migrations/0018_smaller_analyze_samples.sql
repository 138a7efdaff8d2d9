-- ANALYZE reads 300 rows for each unit of the largest statistics target among a
-- table's columns: 30,000 at the default of 100. Autovacuum analyzes a table each time
-- a tenth of it changed, beside the steps, and the time it takes shows in their tail.
--
-- The event log is read only by its key, a workflow's events in seq order; the
-- planner needs no more of it than how many events a workflow has, which a sample of
-- 3,000 rows estimates within a few percent (measured: n_distinct of workflow_id 9,784
-- for 10,000 workflows of 22 events). Target 10: ANALYZE of 220,000 events took 35 ms
-- instead of 220 ms.
ALTER TABLE events
    ALTER COLUMN workflow_id SET STATISTICS 10,
    ALTER COLUMN seq SET STATISTICS 10,
    ALTER COLUMN event_type SET STATISTICS 10,
    ALTER COLUMN recorded_at SET STATISTICS 10;

-- The index rows' payload — the head, the input's digest, the result or error, the
-- blocked reason — is read only with the row's key, never filtered, joined or ordered
-- on: its statistics serve no plan, and computing them was about half of an ANALYZE of
-- `workflows` (measured on 40,000 rows: 220–290 ms with them, 115–160 ms without).
-- The columns lists and scans filter on (status, type, tenant, concurrency
-- key, the times, the events subject, when a head was signed, the open flags) keep the
-- default.
ALTER TABLE workflows
    ALTER COLUMN head_hash SET STATISTICS 0,
    ALTER COLUMN input_digest SET STATISTICS 0,
    ALTER COLUMN output SET STATISTICS 0,
    ALTER COLUMN error SET STATISTICS 0,
    ALTER COLUMN blocked_reason SET STATISTICS 0;
