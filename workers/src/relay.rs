//! The outbox relay: publishes what a crash left in the outbox.
//!
//! Appending processes publish their own rows right after the commit; the relay only
//! takes rows still unpublished after a grace period. It is woken by LISTEN/NOTIFY
//! (debounced to one scan per grace period) with a slow fallback poll, so it never
//! polls Postgres on the hot path. `Nats-Msg-Id` makes a second publish of a row a
//! duplicate JetStream drops.

use std::sync::Arc;
use std::time::Duration;

use hcpflow_eventstore::{OutboxMessage, OUTBOX_CHANNEL};
use tokio::sync::watch;

use crate::journal::Journal;

const GRACE: Duration = Duration::from_secs(2);
const FALLBACK_POLL: Duration = Duration::from_secs(10);
const LEASE: Duration = Duration::from_secs(30);
const BATCH: u32 = 500;

#[derive(Debug)]
pub struct Relay {
    pub journal: Arc<Journal>,
    pub name: String,
}

impl Relay {
    pub async fn run(self, mut shutdown: watch::Receiver<bool>) -> anyhow::Result<()> {
        let mut listener = self.journal.store.listen(&[OUTBOX_CHANNEL]).await?;
        let mut flush = tokio::time::interval(Duration::from_millis(500));
        loop {
            match self.relay_leftovers().await {
                Ok(n) if n as u32 == BATCH => continue,
                Ok(_) => {}
                Err(error) => tracing::warn!(%error, "relaying the outbox failed; retrying"),
            }
            // Wait for activity (then let the grace period pass) or the fallback poll;
            // meanwhile mark what this process published when no append did it.
            let fallback = tokio::time::sleep(FALLBACK_POLL);
            tokio::pin!(fallback);
            let woken = loop {
                tokio::select! {
                    _ = shutdown.changed() => return Ok(()),
                    _ = &mut fallback => break false,
                    _ = flush.tick() => self.journal.flush_published().await,
                    notified = listener.recv() => break notified.is_ok(),
                }
            };
            if woken {
                tokio::select! {
                    _ = shutdown.changed() => return Ok(()),
                    _ = tokio::time::sleep(GRACE) => {}
                }
            }
        }
    }

    async fn relay_leftovers(&self) -> anyhow::Result<usize> {
        let rows = self
            .journal
            .store
            .claim_outbox_older_than(&self.name, GRACE, BATCH, LEASE)
            .await?;
        let oldest = rows.iter().map(|row| row.created_at).min();
        let lag = oldest.map_or(0, |at| {
            u64::try_from((chrono::Utc::now() - at).num_milliseconds()).unwrap_or(0)
        });
        self.journal.metrics.outbox_lag_ms.set(lag);
        if rows.is_empty() {
            return Ok(0);
        }
        let mut published = Vec::with_capacity(rows.len());
        for row in &rows {
            let message = OutboxMessage {
                subject: row.subject.clone(),
                msg_id: row.msg_id.clone(),
                payload: row.payload.clone(),
            };
            match self.journal.publish(&message).await {
                Ok(()) => published.push(row.id),
                Err(error) => {
                    tracing::warn!(%error, subject = %row.subject, "relay publish failed")
                }
            }
        }
        self.journal
            .store
            .mark_published(&self.name, &published)
            .await?;
        self.journal.metrics.relayed.add(published.len() as u64);
        tracing::info!(rows = published.len(), "relayed outbox rows left behind");
        Ok(rows.len())
    }
}
