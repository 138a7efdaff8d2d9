-- What the NATS API needs from the index: idempotent starts compare input digests;
-- describe shows the output or error of a finished workflow.
ALTER TABLE workflows ADD COLUMN input_digest text;
ALTER TABLE workflows ADD COLUMN output jsonb;
ALTER TABLE workflows ADD COLUMN error jsonb;
ALTER TABLE workflows ADD COLUMN blocked_reason text;

-- Active workflows per concurrency key, oldest first (promotion of pending starts).
CREATE INDEX workflows_key_status_idx ON workflows (concurrency_key, status, created_at, workflow_id)
    WHERE concurrency_key IS NOT NULL;
-- The sweeper's scan: live workflows by last change.
CREATE INDEX workflows_live_idx ON workflows (updated_at)
    WHERE status IN ('running', 'compensating');
