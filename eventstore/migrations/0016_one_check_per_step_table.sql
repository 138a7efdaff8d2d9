-- Postgres prepares every CHECK constraint of a table each time a statement writes to
-- it — read back from its stored text, planned, compiled — whatever the columns the
-- statement writes, and keeps none of that from one statement to the next. A step's
-- statement writes three tables with nine constraints between them, and preparing
-- them was about a quarter of its execution (measured on a durable Postgres, one
-- workflow in flight: 134–163 µs a step with the nine, 105–111 µs with none,
-- 118–137 µs with the same conditions as one constraint a table).
--
-- So each of the three tables keeps its conditions, unchanged, in one constraint.
-- Each is added NOT VALID: every row already meets it, held to the same conditions by
-- the constraints dropped in the same transaction, and a validation here would read
-- the whole event log under this migration's exclusive lock, holding up every append
-- of a large deployment for as long. Postgres enforces a NOT VALID constraint on every
-- row written from now on; `ALTER TABLE events VALIDATE CONSTRAINT events_row_check`
-- (and the same for the other two) marks it validated, reading the table without
-- holding up writes.
ALTER TABLE workflows
    DROP CONSTRAINT IF EXISTS workflows_head_hash_check,
    DROP CONSTRAINT IF EXISTS workflows_next_seq_check,
    DROP CONSTRAINT IF EXISTS workflows_status_check,
    DROP CONSTRAINT IF EXISTS workflows_tenant_check,
    ADD CONSTRAINT workflows_row_check CHECK (
        status IN ('pending', 'running', 'completed', 'compensating', 'compensated',
                   'cancelled', 'failed', 'blocked')
        AND next_seq >= 1
        AND length(head_hash) = 32
        AND tenant ~ '^[a-z0-9][a-z0-9-]{0,62}$'
    ) NOT VALID;

ALTER TABLE events
    DROP CONSTRAINT IF EXISTS events_seq_check,
    DROP CONSTRAINT IF EXISTS events_prev_hash_check,
    DROP CONSTRAINT IF EXISTS events_hash_check,
    ADD CONSTRAINT events_row_check CHECK (
        seq >= 1 AND length(prev_hash) = 32 AND length(hash) = 32
    ) NOT VALID;

ALTER TABLE attempt_claims
    DROP CONSTRAINT IF EXISTS attempt_claims_scheduled_seq_check,
    DROP CONSTRAINT IF EXISTS attempt_claims_attempt_check,
    ADD CONSTRAINT attempt_claims_row_check CHECK (scheduled_seq >= 1 AND attempt >= 1) NOT VALID;
