-- The ledger also records objects another owner made (the HyperShift operators' PrivateLink
-- endpoints and records): seen by an activity, deleted by their owner, named here.
ALTER TABLE resource_ledger DROP CONSTRAINT resource_ledger_action_check;
ALTER TABLE resource_ledger ADD CONSTRAINT resource_ledger_action_check
    CHECK (action IN ('created', 'deleted', 'observed'));
ALTER TABLE resource_ledger ADD COLUMN owner text;
ALTER TABLE resource_ledger ADD CONSTRAINT resource_ledger_owner_check
    CHECK ((action = 'observed') = (owner IS NOT NULL));
