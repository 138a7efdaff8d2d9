-- Who runs an activity attempt now (like Temporal's ActivityTaskStarted, kept as a row,
-- not an event): a runner claims (workflow, seq, attempt) under a lease it extends while
-- the attempt runs; a second runner of the same attempt backs off until the lease runs
-- out. The append that records the attempt's outcome deletes the claim in its statement
-- and fails when the runner no longer holds it, so the result of a runner that lost its
-- claim is never recorded.
CREATE TABLE attempt_claims (
    workflow_id   text        NOT NULL REFERENCES workflows (workflow_id),
    scheduled_seq bigint      NOT NULL CHECK (scheduled_seq >= 1),
    attempt       integer     NOT NULL CHECK (attempt >= 1),
    runner        text        NOT NULL,
    lease_until   timestamptz NOT NULL,
    PRIMARY KEY (workflow_id, scheduled_seq, attempt)
);

-- Fails the statement that records an outcome whose runner lost its claim, with a
-- SQLSTATE of its own (the event store reads it as "claim lost", not as a conflict).
CREATE FUNCTION hcpflow_attempt_claim_lost() RETURNS integer
    LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the runner of this attempt no longer holds its claim'
        USING ERRCODE = 'HF001';
END
$$;
