-- Every step moves its workflow's index row: next_seq, head_hash, updated_at and the
-- events-stream mark. Postgres updates a row in place on its page (a heap-only tuple,
-- HOT) only when no index names a column whose value changed. Three partial indexes
-- named those columns, so every step wrote a new row version and an entry in each of
-- the table's ten indexes (measured on a durable Postgres: none of ~22,000 step updates
-- in place before, ~90% after, and about a sixth less Postgres CPU per step).
--
-- Their scans — the sweeper's (idle live workflows), the relay's (events not yet on
-- NATS), the checkpointer's (heads not yet signed) — now look only at the workflows
-- still open for them: the live ones, and ended ones whose events or signature are
-- still to come. Each set is as large as the work in flight, not the whole log, and
-- its index names only a flag that no step changes until the workflow ends.
-- Room on each page for the next version of its rows (first: the columns added below
-- rewrite the table, which then leaves that room on every page).
ALTER TABLE workflows SET (fillfactor = 80);
ALTER TABLE workflows ADD COLUMN events_open boolean NOT NULL GENERATED ALWAYS AS (
    status NOT IN ('completed', 'compensated', 'cancelled', 'failed')
    OR (events_subject IS NOT NULL AND events_published_seq < next_seq - 1)
) STORED;
ALTER TABLE workflows ADD COLUMN signature_open boolean NOT NULL GENERATED ALWAYS AS (
    status NOT IN ('completed', 'compensated', 'cancelled', 'failed')
    OR checkpoint_seq < next_seq - 1
) STORED;

DROP INDEX workflows_live_idx;
DROP INDEX workflows_events_unpublished_idx;
DROP INDEX workflows_unsigned_idx;
-- The sweeper's and the relay's scan.
CREATE INDEX workflows_events_open_idx ON workflows (workflow_id) WHERE events_open;
-- The checkpointer's scan (without an audit key nothing signs, and it holds every
-- workflow, as the index it replaces did; only the checkpointer reads it).
CREATE INDEX workflows_signature_open_idx ON workflows (workflow_id) WHERE signature_open;
