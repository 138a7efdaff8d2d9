//! The transactional outbox: NATS messages written in the same transaction as the events
//! that cause them, then published by a relay.
//!
//! Guarantees: a message is in the outbox if and only if its events were committed.
//! Claims carry a lease: two relays never hold the same row at once, and a row whose
//! relay died is claimed again once its lease runs out (so a message may be published
//! twice; its `msg_id` lets JetStream drop the copy).

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::error::Result;
use crate::store::EventStore;

/// The LISTEN/NOTIFY channel an append notifies when it wrote outbox rows.
pub const OUTBOX_CHANNEL: &str = "hcpflow_outbox";

/// A message to publish once the append commits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxMessage {
    pub subject: String,
    /// Sent as `Nats-Msg-Id` for JetStream's duplicate window.
    pub msg_id: String,
    pub payload: Vec<u8>,
}

/// A message as written, with its row id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxRow {
    pub id: i64,
    pub message: OutboxMessage,
}

/// A row a relay holds under lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedMessage {
    pub id: i64,
    pub workflow_id: String,
    pub subject: String,
    pub msg_id: String,
    pub payload: Vec<u8>,
    /// How many times this row has been claimed, this claim included.
    pub attempts: i32,
    /// When the append that wrote it committed.
    pub created_at: DateTime<Utc>,
}

type ClaimRow = (i64, String, String, String, Vec<u8>, i32, DateTime<Utc>);

impl EventStore {
    /// Claims up to `limit` unpublished messages, oldest first, for `lease`.
    ///
    /// Rows held by a live claim are skipped (`SKIP LOCKED` plus the lease), so concurrent
    /// relays get disjoint batches.
    pub async fn claim_outbox(
        &self,
        claimer: &str,
        limit: u32,
        lease: Duration,
    ) -> Result<Vec<ClaimedMessage>> {
        self.claim_outbox_older_than(claimer, "", Duration::ZERO, limit, lease)
            .await
    }

    /// Marks messages published. Only rows still claimed by `claimer` are changed;
    /// returns how many were.
    pub async fn mark_published(&self, claimer: &str, ids: &[i64]) -> Result<u64> {
        let done = sqlx::query(
            "UPDATE outbox SET published_at = now(), claim_expires_at = NULL
              WHERE id = ANY($1) AND claimed_by = $2 AND published_at IS NULL",
        )
        .bind(ids)
        .bind(claimer)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected())
    }

    /// Marks rows published that this process published itself right after their
    /// commit (no claim involved). Returns how many were still unpublished.
    pub async fn mark_published_unclaimed(&self, ids: &[i64]) -> Result<u64> {
        let done = sqlx::query(
            "UPDATE outbox SET published_at = now(), claim_expires_at = NULL
              WHERE id = ANY($1) AND published_at IS NULL",
        )
        .bind(ids)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected())
    }

    /// Claims up to `limit` unpublished messages older than `grace` — what a crash left
    /// behind after a commit, before its process published — for `lease`; only those
    /// whose subject starts with `subject_prefix` (a deployment's own, where several
    /// share the database; "" for all).
    pub async fn claim_outbox_older_than(
        &self,
        claimer: &str,
        subject_prefix: &str,
        grace: Duration,
        limit: u32,
        lease: Duration,
    ) -> Result<Vec<ClaimedMessage>> {
        let rows: Vec<ClaimRow> = sqlx::query_as(
            "UPDATE outbox o
                SET claimed_by = $1,
                    claim_expires_at = now() + make_interval(secs => $3),
                    attempts = o.attempts + 1
              WHERE o.id IN (
                    SELECT id FROM outbox
                     WHERE published_at IS NULL
                       AND created_at < now() - make_interval(secs => $4)
                       AND (claim_expires_at IS NULL OR claim_expires_at < now())
                       AND left(subject, length($5)) = $5
                     ORDER BY id
                     LIMIT $2
                     FOR UPDATE SKIP LOCKED)
             RETURNING o.id, o.workflow_id, o.subject, o.msg_id, o.payload, o.attempts, o.created_at",
        )
        .bind(claimer)
        .bind(i64::from(limit))
        .bind(lease.as_secs_f64())
        .bind(grace.as_secs_f64())
        .bind(subject_prefix)
        .fetch_all(&self.pool)
        .await?;
        let mut claimed: Vec<ClaimedMessage> = rows
            .into_iter()
            .map(
                |(id, workflow_id, subject, msg_id, payload, attempts, created_at)| {
                    ClaimedMessage {
                        id,
                        workflow_id,
                        subject,
                        msg_id,
                        payload,
                        attempts,
                        created_at,
                    }
                },
            )
            .collect();
        claimed.sort_by_key(|message| message.id);
        Ok(claimed)
    }
}
