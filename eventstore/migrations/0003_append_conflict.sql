-- Raised by a single-statement append whose index moved under it, so the statement —
-- and every row it wrote — is rolled back even without an enclosing transaction.
CREATE FUNCTION hcpflow_append_conflict() RETURNS integer
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    RAISE EXCEPTION 'hcpflow: append conflict: the workflow''s history moved'
        USING ERRCODE = 'unique_violation';
END
$$;
