-- The outbox, timers and attempt claims are transient rows (deleted once published,
-- fired or released). The append statements write them only for a workflow whose index
-- row they move; the checkpointer's witness rows are for a workflow it read; a runner's
-- claim names the attempt its task names (a claim for a workflow that does not exist
-- claims nothing and expires). Workflows are never deleted. Their foreign keys checked
-- nothing the writers do not, at a cost on every step: a trigger and a lookup of the
-- index row per inserted row. The event log and the ledger keep theirs.
ALTER TABLE outbox DROP CONSTRAINT IF EXISTS outbox_workflow_id_fkey;
ALTER TABLE timers DROP CONSTRAINT IF EXISTS timers_workflow_id_fkey;
ALTER TABLE attempt_claims DROP CONSTRAINT IF EXISTS attempt_claims_workflow_id_fkey;
