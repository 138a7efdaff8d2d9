//! The checkpointer (runs with the relay role): signs the heads of histories with the
//! audit key (DESIGN.md §7) — every ended workflow at its last event, and live ones
//! periodically — and stores each checkpoint in Postgres and, as an independent
//! witness, on the append-only `<PREFIX>_AUDIT` stream.
//!
//! Guarantees: a head is signed only over a chain that verifies — read back and
//! checked, or written whole by this process, which then signs the hash it computed
//! over its own bytes (`runtime/witnessed.rs`; an event changed in the database before
//! such a signature is not reported here but by `audit verify`, against it) — and an
//! ended history only at its end event (never an event appended after it); the checkpoint row
//! and its witness message are one transaction, and the message is published by this
//! process or, if it dies, by a relay once the claim's lease ends. Signing twice is
//! harmless (the row exists; nothing is written twice).

use std::collections::BTreeSet;

use futures::future::join_all;
use futures::stream::{self, StreamExt};
use std::sync::Arc;
use std::time::Duration;

use hcpflow_engine::{AuditSigningKey, Seq, WorkflowId};
use hcpflow_eventstore::{Error as StoreError, OutboxMessage, UnsignedHead};
use tokio::sync::watch;

use crate::runtime::journal::Journal;
use crate::runtime::witnessed::Vouch;

/// How soon a scan that found heads to sign looks again: workflows are ending, and
/// small batches often keep each burst short. A batch's reads, signatures and
/// transaction are a burst of CPU on the machine the steps run on: at one scan a second,
/// a hundred ended workflows' burst delayed the steps beside it (measured at one
/// workflow in flight: p99 19.5 ms with 1 s, 17.7 ms with 200 ms, a third fewer steps
/// slower than 5 ms).
const TICK: Duration = Duration::from_millis(200);
/// How soon a scan that found nothing to sign (or failed) looks again. Longer: each
/// scan reads the index row of every live workflow (they are signed every
/// `live_every`), thousands under load, and a second's delay in signing costs nothing.
pub const IDLE_TICK: Duration = Duration::from_secs(1);
const BATCH: u32 = 100;
const LEASE: Duration = Duration::from_secs(30);
/// Chains verified at once: each is a read of the whole history and its hashing.
const VERIFY_CONCURRENCY: usize = 4;

#[derive(Debug)]
pub struct Checkpointer {
    pub journal: Arc<Journal>,
    pub key: Arc<AuditSigningKey>,
    pub name: String,
    /// How often a live workflow's head is signed while it moves.
    pub live_every: Duration,
}

impl Checkpointer {
    pub async fn run(self, mut shutdown: watch::Receiver<bool>) -> anyhow::Result<()> {
        // The journal remembers the heads it writes whole for this loop: the server
        // turns that on before any role starts (`server::run`).
        tracing::info!(key_id = %self.key.public_key().key_id(), public_key = %self.key.public_key().to_base64(), "signing history checkpoints");
        // Heads whose chain did not verify: reported once, never signed, and left out
        // of later scans.
        let mut refused: BTreeSet<(WorkflowId, Seq)> = BTreeSet::new();
        loop {
            self.journal.metrics.checkpoint_scans.inc();
            // A full batch signed: more may wait, scan again at once. Anything else
            // waits, so the loop never spins: a tick after a batch, a longer one after
            // a scan that signed nothing (heads that moved on or were refused) or failed.
            let wait = match self.sign_batch(&mut refused).await {
                Ok(signed) if signed == BATCH as usize => continue,
                Ok(0) => IDLE_TICK,
                Ok(_) => TICK,
                Err(error) => {
                    tracing::warn!(%error, "signing checkpoints failed; retrying");
                    IDLE_TICK
                }
            };
            tokio::select! {
                _ = shutdown.changed() => return Ok(()),
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// Signs one batch of unsigned heads; how many it signed. The chains are verified a
    /// few at a time, the batch's checkpoints stored in one commit, their witnesses
    /// published together and marked in one statement: signing keeps up with hundreds
    /// of workflows ending a second (one at a time, it fell behind them for good).
    async fn sign_batch(&self, refused: &mut BTreeSet<(WorkflowId, Seq)>) -> anyhow::Result<usize> {
        let store = &self.journal.store;
        let events_prefix = format!("{}.events.", self.journal.outgoing.subjects.prefix());
        let skip: Vec<(WorkflowId, Seq)> = refused.iter().cloned().collect();
        let heads = store
            .unsigned_heads(&events_prefix, self.live_every, BATCH, &skip)
            .await?;
        let mut readable = Vec::with_capacity(heads.len());
        for head in heads {
            match head {
                Ok(head) => readable.push(head),
                Err(corrupt) => {
                    tracing::error!(workflow_id = %corrupt.workflow_id, seq = corrupt.seq.get(), reason = %corrupt.reason, "the index row does not read: its head is not signed");
                    refuse(refused, (corrupt.workflow_id, corrupt.seq));
                }
            }
        }
        let checked: Vec<(UnsignedHead, Result<bool, ChainCheck>)> = stream::iter(readable)
            .map(|head| async move {
                let check = match self.journal.witnessed.vouch(&head) {
                    Vouch::Witnessed => {
                        self.journal.metrics.checkpoint_heads_witnessed.inc();
                        Ok(true)
                    }
                    // Possibly committed and not yet recorded: the next scan signs it.
                    Vouch::StepInFlight => {
                        self.journal.metrics.checkpoint_heads_deferred.inc();
                        Ok(false)
                    }
                    Vouch::Unknown => {
                        self.journal.metrics.checkpoint_chains_read.inc();
                        self.check_chain(&head).await
                    }
                };
                (head, check)
            })
            .buffer_unordered(VERIFY_CONCURRENCY)
            .collect()
            .await;
        let mut signed = Vec::with_capacity(checked.len());
        let mut ended = Vec::new();
        let mut unavailable = None;
        for (head, check) in checked {
            match check {
                Ok(true) => {}
                // The workflow moved on since the scan (or is moving here): the next scan
                // signs the new head.
                Ok(false) => continue,
                Err(ChainCheck::Refused(reason)) => {
                    tracing::error!(workflow_id = %head.workflow_id, seq = head.seq.get(), %reason, "history does not verify: its head is not signed");
                    refuse(refused, (head.workflow_id.clone(), head.seq));
                    continue;
                }
                // Postgres trouble that passes: the head is tried again next round.
                Err(ChainCheck::Unavailable(error)) => {
                    unavailable = Some(error);
                    continue;
                }
            }
            if head.status.is_terminal() {
                ended.push(head.workflow_id.clone());
            }
            let checkpoint = self.key.sign(&head.workflow_id, head.seq, head.head_hash);
            let witness = OutboxMessage {
                subject: self
                    .journal
                    .outgoing
                    .subjects
                    .audit(head.workflow_id.as_str()),
                msg_id: format!("ck-{}-{}", head.workflow_id, head.seq),
                payload: serde_json::to_vec(&checkpoint)?,
            };
            signed.push((checkpoint, witness));
        }
        let rows = store.record_checkpoints(&signed, &self.name, LEASE).await?;
        // An ended workflow signed at its end is not signed again: its head is done with.
        for id in &ended {
            self.journal.witnessed.forget(id);
        }
        let signed = &signed;
        let published = join_all(rows.iter().map(|&(i, row)| async move {
            self.journal.publish(&signed[i].1).await.ok().map(|()| row)
        }))
        .await;
        // A witness not published stays claimed; a relay publishes it once the lease ends.
        let published: Vec<i64> = published.into_iter().flatten().collect();
        if !published.is_empty() {
            store.mark_published(&self.name, &published).await?;
        }
        if let Some(error) = unavailable {
            return Err(error.into());
        }
        Ok(signed.len())
    }

    /// Whether the stored chain verifies and still ends at `head` (false: it moved on).
    async fn check_chain(&self, head: &UnsignedHead) -> Result<bool, ChainCheck> {
        let verified = self
            .journal
            .store
            .verify_history(&head.workflow_id)
            .await
            .map_err(ChainCheck::from_store)?;
        if verified.events != head.seq.get() || verified.head_hash != head.head_hash {
            return Ok(false);
        }
        // An ended history is signed at its end event, never past it: events after the
        // end were not written by the engine.
        if head.status.is_terminal() {
            let kind = verified.head_event_type.as_deref();
            if !kind.is_some_and(hcpflow_engine::Event::is_terminal_kind) {
                return Err(ChainCheck::Refused(format!(
                    "the workflow ended ({}) but its last event is {}: events after the end",
                    head.status,
                    kind.unwrap_or("missing")
                )));
            }
        }
        Ok(true)
    }
}

/// Why a head is not signed now.
#[derive(Debug)]
enum ChainCheck {
    /// The history does not verify: never signed.
    Refused(String),
    /// The store could not answer: tried again next round.
    Unavailable(StoreError),
}

impl ChainCheck {
    fn from_store(error: StoreError) -> Self {
        match error {
            StoreError::Corrupt { .. } | StoreError::Decode { .. } => {
                Self::Refused(error.to_string())
            }
            other => Self::Unavailable(other),
        }
    }
}

/// Most refused heads remembered: beyond, the set starts over (a head refused again
/// costs one more check), so it neither grows nor fills every scan's query for ever.
const MAX_REFUSED: usize = 1000;

fn refuse(refused: &mut BTreeSet<(WorkflowId, Seq)>, head: (WorkflowId, Seq)) {
    if refused.len() >= MAX_REFUSED {
        refused.clear();
    }
    refused.insert(head);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_history_that_does_not_verify_is_refused_for_good() {
        let corrupt = StoreError::Corrupt {
            workflow_id: "wf".into(),
            seq: 3,
            reason: "hash mismatch".into(),
        };
        assert!(matches!(
            ChainCheck::from_store(corrupt),
            ChainCheck::Refused(_)
        ));
        let unreachable = StoreError::Database(sqlx::Error::PoolTimedOut);
        assert!(matches!(
            ChainCheck::from_store(unreachable),
            ChainCheck::Unavailable(_)
        ));
    }
}
