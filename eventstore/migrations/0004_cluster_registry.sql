-- The cluster registry: cluster name -> infra id, namespace, the create workflow, state.
-- A name is live until its cluster is destroyed; at most one live cluster per name.
CREATE TABLE cluster_registry (
    create_workflow_id text PRIMARY KEY,
    name               text NOT NULL,
    infra_id           text NOT NULL,
    namespace          text NOT NULL,
    state              text NOT NULL
        CHECK (state IN ('creating', 'ready', 'destroying', 'destroyed', 'failed')),
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now()
);

CREATE UNIQUE INDEX cluster_registry_live_name ON cluster_registry (name)
    WHERE state <> 'destroyed';
