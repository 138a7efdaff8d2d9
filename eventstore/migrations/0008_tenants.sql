-- Every workflow belongs to a tenant (issue 19): the API scopes each read and write to
-- the caller's tenant, which NATS permissions on the tenant's subjects establish. Rows
-- recorded before tenants existed belong to the default tenant. A cluster belongs to
-- the tenant of the workflow that created it (cluster_registry.create_workflow_id).
ALTER TABLE workflows ADD COLUMN tenant text NOT NULL DEFAULT 'default'
    CHECK (tenant ~ '^[a-z0-9][a-z0-9-]{0,62}$');

CREATE INDEX workflows_tenant_created ON workflows (tenant, created_at DESC, workflow_id DESC);

-- A workflow's tenant is fixed when it is created: not even the server's own role can
-- move a workflow (and the cluster it owns) to another tenant.
CREATE FUNCTION hcpflow_tenant_is_fixed() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.tenant IS DISTINCT FROM OLD.tenant THEN
        RAISE EXCEPTION 'the tenant of workflow % cannot change', OLD.workflow_id;
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER workflows_tenant_is_fixed BEFORE UPDATE OF tenant ON workflows
    FOR EACH ROW EXECUTE FUNCTION hcpflow_tenant_is_fixed();
