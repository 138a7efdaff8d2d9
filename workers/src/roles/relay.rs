//! The outbox relay: publishes what a crash left in the outbox, and appended events the
//! events stream has not seen.
//!
//! Appending processes publish their own rows right after the commit, and their events
//! in batches a few milliseconds later; the relay only takes rows still unpublished,
//! and events above their workflow's watermark, after a grace period. It is woken by LISTEN/NOTIFY when an append writes
//! rows it may have to publish (not for appends without messages, nor for rows their
//! appender claimed to run itself), debounced to one scan per grace period, with a slow
//! fallback poll that finds what a crash left, so it never polls Postgres on the hot
//! path. `Nats-Msg-Id` makes a second publish of a row a
//! duplicate JetStream drops.

use std::sync::Arc;
use std::time::Duration;

use std::collections::BTreeMap;

use hcpflow_engine::WorkflowId;
use hcpflow_eventstore::{OutboxMessage, PublishedRange, PublishedRuns, OUTBOX_CHANNEL};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::runtime::journal::Journal;
use crate::runtime::outgoing::event_on;

const GRACE: Duration = Duration::from_secs(2);
const FALLBACK_POLL: Duration = Duration::from_secs(10);
const LEASE: Duration = Duration::from_secs(30);
const BATCH: u32 = 500;
/// How often the relay deletes published outbox rows, fired timers and expired attempt
/// claims older than its retention (`--done-retention-secs`).
const PURGE_EVERY: Duration = Duration::from_secs(60);
/// At most this many batches of 10,000 per table in one pass (a million rows a minute,
/// far beyond what steps produce), so a large backlog shrinks within a few passes.
const MAX_PURGE_BATCHES: usize = 100;

/// When the relay purges: every [`PURGE_EVERY`], the first a period after it starts.
#[derive(Debug, Clone, Copy)]
struct PurgeSchedule {
    last: Instant,
}

impl PurgeSchedule {
    fn starting_at(start: Instant) -> Self {
        Self { last: start }
    }

    /// Whether a purge is due at `now`; when it is, the next period starts at `now`.
    fn due(&mut self, now: Instant) -> bool {
        if now.saturating_duration_since(self.last) < PURGE_EVERY {
            return false;
        }
        self.last = now;
        true
    }
}

#[derive(Debug)]
pub struct Relay {
    pub journal: Arc<Journal>,
    pub name: String,
    /// How long what is done is kept before [`Relay::purge`] deletes it.
    pub retention: Duration,
}

impl Relay {
    /// `<prefix>.`: deployments sharing a database each relay their own messages.
    fn own_subjects(&self) -> String {
        format!("{}.", self.journal.outgoing.subjects.prefix())
    }

    pub async fn run(self, mut shutdown: watch::Receiver<bool>) -> anyhow::Result<()> {
        let mut listener = self.journal.store.listen(&[OUTBOX_CHANNEL]).await?;
        let mut purges = PurgeSchedule::starting_at(Instant::now());
        loop {
            if purges.due(Instant::now()) {
                self.purge().await;
            }
            let rows = self.relay_leftovers().await;
            let events = self.relay_unpublished_events().await;
            match (rows, events) {
                (Ok(rows), Ok(events)) if rows as u32 == BATCH || events as u32 == BATCH => {
                    continue
                }
                (Ok(_), Ok(_)) => {}
                (Err(error), _) | (_, Err(error)) => {
                    tracing::warn!(%error, "relaying the outbox failed; retrying")
                }
            }
            // Wait for activity (then let the grace period pass) or the fallback poll.
            let woken = tokio::select! {
                _ = shutdown.changed() => return Ok(()),
                _ = tokio::time::sleep(FALLBACK_POLL) => false,
                notified = listener.recv() => notified.is_ok(),
            };
            if woken {
                tokio::select! {
                    _ = shutdown.changed() => return Ok(()),
                    _ = tokio::time::sleep(GRACE) => {}
                }
            }
        }
    }

    /// Deletes what is done and older than the retention: batch after batch while
    /// batches come back full (a backlog), up to a bound per pass so the relay gets on
    /// with its own work.
    async fn purge(&self) {
        for _ in 0..MAX_PURGE_BATCHES {
            match self.journal.store.purge_done(self.retention).await {
                Ok(purged) if purged.backlog() => {
                    tracing::debug!(?purged, "purged done rows; more to go");
                    tokio::task::yield_now().await;
                }
                Ok(purged) => {
                    if purged.total() > 0 {
                        tracing::debug!(?purged, "purged done rows");
                    }
                    return;
                }
                Err(error) => {
                    tracing::warn!(%error, "purging done rows failed; trying again later");
                    return;
                }
            }
        }
    }

    async fn relay_leftovers(&self) -> anyhow::Result<usize> {
        let rows = self
            .journal
            .store
            .claim_outbox_older_than(&self.name, &self.own_subjects(), GRACE, BATCH, LEASE)
            .await?;
        self.journal
            .metrics
            .outbox_lag_ms
            .set(lag_ms(rows.iter().map(|row| row.created_at).min()));
        if rows.is_empty() {
            return Ok(0);
        }
        let messages: Vec<OutboxMessage> = rows
            .iter()
            .map(|row| OutboxMessage {
                subject: row.subject.clone(),
                msg_id: row.msg_id.clone(),
                payload: row.payload.clone(),
            })
            .collect();
        let acked = self.journal.publish_all(&messages).await;
        let published: Vec<i64> = rows
            .iter()
            .zip(acked)
            .filter(|(_, acked)| *acked)
            .map(|(row, _)| row.id)
            .collect();
        self.journal
            .store
            .mark_published(&self.name, &published)
            .await?;
        self.journal.metrics.relayed.add(published.len() as u64);
        tracing::info!(rows = published.len(), "relayed outbox rows left behind");
        Ok(rows.len())
    }

    /// Publishes events above their workflow's watermark and moves the marks over what
    /// JetStream acknowledged. Two relays may publish the same event; its `Nats-Msg-Id`
    /// makes the second a duplicate.
    async fn relay_unpublished_events(&self) -> anyhow::Result<usize> {
        let unpublished = self
            .journal
            .store
            .unpublished_events(&self.own_subjects(), GRACE, BATCH)
            .await?;
        let lag = lag_ms(unpublished.oldest_change);
        if lag > self.journal.metrics.outbox_lag_ms.get() {
            self.journal.metrics.outbox_lag_ms.set(lag);
        }
        let events = unpublished.events;
        if events.is_empty() {
            return Ok(0);
        }
        let messages: Vec<OutboxMessage> = events
            .iter()
            .map(|(subject, event)| event_on(subject, event))
            .collect();
        let acked = self.journal.publish_all(&messages).await;
        // Per workflow, the acknowledged events joined into runs; only the earliest can
        // move the mark (it starts right after it unless its first event failed, and
        // then the store refuses it).
        let mut runs: BTreeMap<WorkflowId, PublishedRuns> = BTreeMap::new();
        for ((_, event), acked) in events.iter().zip(acked) {
            if acked {
                runs.entry(event.workflow_id.clone())
                    .or_default()
                    .add(PublishedRange {
                        first: event.seq,
                        last: event.seq,
                    });
            }
        }
        let ranges: Vec<(WorkflowId, PublishedRange)> = runs
            .into_iter()
            .filter_map(|(id, mut runs)| runs.take_first().map(|range| (id, range)))
            .collect();
        // What is not marked now (a row an append held at that moment) is found and
        // published again on a later pass; JetStream drops the copy by its message id.
        self.journal.store.mark_events_published(&ranges).await?;
        self.journal.metrics.relayed.add(events.len() as u64);
        tracing::info!(
            events = events.len(),
            "relayed events the events stream had not seen"
        );
        Ok(events.len())
    }
}

/// How long ago `oldest` was, in milliseconds (0 for nothing left behind).
fn lag_ms(oldest: Option<chrono::DateTime<chrono::Utc>>) -> u64 {
    oldest.map_or(0, |at| {
        u64::try_from((chrono::Utc::now() - at).num_milliseconds()).unwrap_or(0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The relay's loop purges when its schedule says so (and the lint against dead
    /// code fails the build if it stops calling [`Relay::purge`]): once a minute, the
    /// first a minute after it starts.
    #[test]
    fn the_relay_purges_every_minute() {
        let minute = Duration::from_secs(60);
        let start = Instant::now();
        let mut purges = PurgeSchedule::starting_at(start);
        assert!(!purges.due(start), "not as it starts");
        assert!(!purges.due(start + minute - Duration::from_millis(1)));
        assert!(purges.due(start + minute), "a minute after it starts");
        assert!(!purges.due(start + minute), "once a period");
        assert!(!purges.due(start + 2 * minute - Duration::from_millis(1)));
        assert!(purges.due(start + 2 * minute), "every minute");
        // A loop that came round late (a long relay pass) purges at once, and counts
        // the next minute from then.
        let late = start + 3 * minute + Duration::from_secs(25);
        assert!(purges.due(late));
        assert!(!purges.due(late + minute - Duration::from_millis(1)));
        assert!(purges.due(late + minute));
    }
}
