-- The purge of what is done (retention.rs) finds published outbox rows and fired timers
-- by their time: without these it scans both tables on every pass.
CREATE INDEX outbox_published_at_idx ON outbox (published_at) WHERE published_at IS NOT NULL;
CREATE INDEX timers_fired_at_idx ON timers (fired_at) WHERE fired_at IS NOT NULL;
