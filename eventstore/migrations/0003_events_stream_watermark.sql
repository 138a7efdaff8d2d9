-- The events stream is published from the event log itself, not from outbox rows: each
-- workflow keeps the highest seq up to which its events are known to be on NATS. An
-- append's own process publishes right after the commit and moves the mark in its next
-- write; the relay publishes what a crash left between the mark and the head.
ALTER TABLE workflows ADD COLUMN events_published_seq bigint NOT NULL DEFAULT 0;
-- The subject the workflow's events go to (several deployments, each with its own
-- subject prefix, may share one database); NULL: no events stream.
ALTER TABLE workflows ADD COLUMN events_subject text;
-- Histories written before this migration had their events in the outbox already.
UPDATE workflows SET events_published_seq = next_seq - 1;
-- The relay's scan: workflows whose head is ahead of the mark, by last change.
CREATE INDEX workflows_events_unpublished_idx ON workflows (updated_at)
    WHERE events_published_seq < next_seq - 1 AND events_subject IS NOT NULL;
