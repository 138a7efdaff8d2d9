-- The workflow index, the append-only event log, and the tables written in the same
-- transaction as an append: outbox, timers, resource ledger.

CREATE TABLE workflows (
    workflow_id     text        PRIMARY KEY,
    workflow_type   text        NOT NULL,
    status          text        NOT NULL CHECK (status IN ('pending', 'running', 'completed',
                        'compensating', 'compensated', 'cancelled', 'failed', 'blocked')),
    concurrency_key text,
    parent_id       text,
    next_seq        bigint      NOT NULL CHECK (next_seq >= 1),
    head_hash       bytea       NOT NULL CHECK (length(head_hash) = 32),
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX workflows_status_idx ON workflows (status, created_at DESC, workflow_id DESC);
CREATE INDEX workflows_type_idx ON workflows (workflow_type, created_at DESC, workflow_id DESC);
CREATE INDEX workflows_concurrency_key_idx ON workflows (concurrency_key, created_at DESC, workflow_id DESC)
    WHERE concurrency_key IS NOT NULL;
CREATE INDEX workflows_created_idx ON workflows (created_at DESC, workflow_id DESC);

-- body holds the exact canonical bytes that were hashed (jsonb would reorder keys).
CREATE TABLE events (
    workflow_id text        NOT NULL REFERENCES workflows (workflow_id),
    seq         bigint      NOT NULL CHECK (seq >= 1),
    event_type  text        NOT NULL,
    recorded_at timestamptz NOT NULL,
    body        bytea       NOT NULL,
    prev_hash   bytea       NOT NULL CHECK (length(prev_hash) = 32),
    hash        bytea       NOT NULL CHECK (length(hash) = 32),
    PRIMARY KEY (workflow_id, seq)
);

CREATE FUNCTION hcpflow_refuse_event_log_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'hcpflow event log is append-only: % on % refused', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END
$$;

CREATE TRIGGER events_append_only_rows
    BEFORE UPDATE OR DELETE ON events
    FOR EACH ROW EXECUTE FUNCTION hcpflow_refuse_event_log_change();
CREATE TRIGGER events_append_only_truncate
    BEFORE TRUNCATE ON events
    FOR EACH STATEMENT EXECUTE FUNCTION hcpflow_refuse_event_log_change();

-- NATS messages caused by an append; a relay claims rows with a lease and marks them published.
CREATE TABLE outbox (
    id               bigserial   PRIMARY KEY,
    workflow_id      text        NOT NULL REFERENCES workflows (workflow_id),
    subject          text        NOT NULL,
    msg_id           text        NOT NULL,
    payload          bytea       NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    claimed_by       text,
    claim_expires_at timestamptz,
    attempts         integer     NOT NULL DEFAULT 0,
    published_at     timestamptz
);
CREATE INDEX outbox_unpublished_idx ON outbox (id) WHERE published_at IS NULL;

-- Durable timers and retry backoffs, claimed with SKIP LOCKED and a lease.
CREATE TABLE timers (
    id               bigserial   PRIMARY KEY,
    workflow_id      text        NOT NULL REFERENCES workflows (workflow_id),
    seq              bigint      NOT NULL,
    kind             text        NOT NULL CHECK (kind IN ('timer', 'retry')),
    due_at           timestamptz NOT NULL,
    claimed_by       text,
    claim_expires_at timestamptz,
    fired_at         timestamptz
);
CREATE INDEX timers_workflow_idx ON timers (workflow_id, seq);
CREATE INDEX timers_due_idx ON timers (due_at) WHERE fired_at IS NULL;

-- Every cloud or Kubernetes object a workflow created or deleted.
CREATE TABLE resource_ledger (
    id          bigserial   PRIMARY KEY,
    workflow_id text        NOT NULL REFERENCES workflows (workflow_id),
    seq         bigint      NOT NULL,
    attempt     integer     NOT NULL CHECK (attempt >= 1),
    action      text        NOT NULL CHECK (action IN ('created', 'deleted')),
    provider    text        NOT NULL,
    kind        text        NOT NULL,
    resource_id text        NOT NULL,
    region      text,
    cluster     text,
    recorded_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX resource_ledger_workflow_idx ON resource_ledger (workflow_id, id);
CREATE INDEX resource_ledger_cluster_idx ON resource_ledger (cluster, id) WHERE cluster IS NOT NULL;
