-- Four tables churn at the rate of the steps: an attempt claim lives as long as its
-- attempt runs, an outbox row or a timer until its message is out or it fires (then
-- until the retention purge), and every step writes a new version of its workflow's
-- index row. By the default rule (vacuum once the dead rows pass a fifth of the table)
-- their dead rows outnumbered the live ones many times over in a 20-minute soak
-- (`attempt_claims`: ~72,000 dead beside ~75 live), and every scan, lock and index
-- lookup on them waded through the dead versions.
--
-- `attempt_claims` holds only the attempts running now: it is vacuumed once 1,000 of
-- its rows died, whatever its size, without the cost-based pauses (a pass takes
-- milliseconds and should not wait behind a vacuum of `events`). The others grow with
-- the retention and the log, so they keep the throttled vacuum, started sooner: once
-- 2% (`outbox`, `timers`) or 5% (`workflows`) of their rows, plus 1,000, died. How
-- often autovacuum looks at all is the server's `autovacuum_naptime` (see
-- deploy/README.md, "Sizing").
ALTER TABLE attempt_claims SET (
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_cost_delay = 0
);
ALTER TABLE outbox SET (
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_threshold = 1000
);
ALTER TABLE timers SET (
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_threshold = 1000
);
ALTER TABLE workflows SET (
    autovacuum_vacuum_scale_factor = 0.05,
    autovacuum_vacuum_threshold = 1000
);
