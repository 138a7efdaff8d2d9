-- ANALYZE samples up to 30,000 rows of a table and computes statistics for each
-- column: its distinct values, most common values and histogram, for the planner to
-- estimate how many rows a condition keeps. The event log is only ever read by its
-- key (a workflow's events, in seq order), and no query compares its bodies or hashes
-- in a condition, a join or an ordering: their statistics serve no plan. Computing
-- them, sorting 30,000 bodies of ~500 bytes, was ~40% of an ANALYZE of `events`
-- (measured: 220 ms with them, 134 ms without, on 192,000 events). Autovacuum analyzes
-- the log each time it grows by a tenth, and that pass runs beside the steps: a round
-- of one workflow in flight that an autovacuum pass fell into had a p99 of 21.9 ms,
-- against 13.8–17.0 ms for the rounds around it.
--
-- A column's statistics target takes a lock that lets reads and writes go on.
ALTER TABLE events
    ALTER COLUMN body SET STATISTICS 0,
    ALTER COLUMN prev_hash SET STATISTICS 0,
    ALTER COLUMN hash SET STATISTICS 0;
