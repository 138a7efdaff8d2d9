-- When the sweeper last published the task of a claim that had lapsed. An attempt run
-- where it was scheduled (eager dispatch) has no outbox row: if its runner dies, the
-- lapsed claim is all that says its task must go out again. The sweeper publishes it
-- once per lapse (a runner that takes the claim over moves `lease_until` past
-- `swept_at`), and again only if nobody has taken it a while later; several sweepers
-- never publish the same lapse at once.
ALTER TABLE attempt_claims ADD COLUMN swept_at timestamptz;
