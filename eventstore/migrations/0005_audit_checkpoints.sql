-- Signed heads of histories (DESIGN.md §7): the audit key's Ed25519 signature over
-- (workflow id, seq, head hash). Append-only like the event log; a copy of each goes to
-- the append-only JetStream stream <PREFIX>_AUDIT as an independent witness.
CREATE TABLE audit_checkpoints (
    workflow_id text        NOT NULL REFERENCES workflows (workflow_id),
    seq         bigint      NOT NULL CHECK (seq >= 1),
    head_hash   bytea       NOT NULL CHECK (length(head_hash) = 32),
    key_id      text        NOT NULL,
    signature   bytea       NOT NULL CHECK (length(signature) = 64),
    signed_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workflow_id, seq)
);

CREATE TRIGGER audit_checkpoints_append_only_rows
    BEFORE UPDATE OR DELETE ON audit_checkpoints
    FOR EACH ROW EXECUTE FUNCTION hcpflow_refuse_event_log_change();
CREATE TRIGGER audit_checkpoints_append_only_truncate
    BEFORE TRUNCATE ON audit_checkpoints
    FOR EACH STATEMENT EXECUTE FUNCTION hcpflow_refuse_event_log_change();

-- The seq of each workflow's latest checkpoint, and when it was signed; the checkpointer
-- scans the workflows whose head is ahead of it.
ALTER TABLE workflows ADD COLUMN checkpoint_seq bigint NOT NULL DEFAULT 0;
ALTER TABLE workflows ADD COLUMN checkpoint_at timestamptz;
CREATE INDEX workflows_unsigned_idx ON workflows (updated_at)
    WHERE checkpoint_seq < next_seq - 1;
