//! Audit checkpoints (DESIGN.md §7): signed heads, stored append-only, each with an
//! outbox message that carries a copy to the witness stream.

use std::time::Duration;

use chrono::{DateTime, Utc};
use hcpflow_engine::{ChainHash, Checkpoint, Seq, WorkflowId, WorkflowStatus};

use crate::error::{Error, Result};
use crate::outbox::OutboxMessage;
use crate::store::EventStore;
use crate::timers::to_i64;

/// A head that has no checkpoint yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsignedHead {
    pub workflow_id: WorkflowId,
    pub seq: Seq,
    pub head_hash: ChainHash,
    pub status: WorkflowStatus,
}

/// An unsigned head whose index row does not read: never signed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorruptHead {
    pub workflow_id: WorkflowId,
    pub seq: Seq,
    pub reason: String,
}

/// A stored checkpoint and when it was signed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredCheckpoint {
    pub checkpoint: Checkpoint,
    pub signed_at: DateTime<Utc>,
}

type CheckpointRow = (String, i64, Vec<u8>, String, Vec<u8>, DateTime<Utc>);

fn to_checkpoint(row: CheckpointRow) -> Result<StoredCheckpoint> {
    let (workflow_id, seq, head_hash, key_id, signature, signed_at) = row;
    let corrupt = |reason: String| Error::Corrupt {
        workflow_id: workflow_id.clone(),
        seq: u64::try_from(seq).unwrap_or(0),
        reason,
    };
    Ok(StoredCheckpoint {
        checkpoint: Checkpoint {
            workflow_id: WorkflowId::new(workflow_id.clone())
                .map_err(|e| corrupt(format!("checkpoint: {e}")))?,
            seq: u64::try_from(seq)
                .ok()
                .and_then(|s| Seq::new(s).ok())
                .ok_or_else(|| corrupt(format!("checkpoint seq {seq}")))?,
            head_hash: ChainHash::from_slice(&head_hash)
                .map_err(|e| corrupt(format!("checkpoint: {e}")))?,
            key_id,
            signature,
        },
        signed_at,
    })
}

impl EventStore {
    /// Heads to sign, oldest change first: every ended workflow whose last event has no
    /// checkpoint, and live ones whose head moved and whose last checkpoint is older
    /// than `every`. Only workflows whose events go to `events_prefix` (`<prefix>.events.`)
    /// — the deployments sharing a database sign their own. Heads in `skip` (ones the
    /// caller refused) are left out, so they cannot fill every batch. A row that does
    /// not read (a bad head hash or status: the table's checks forbid both, so only a
    /// tampered schema has one) comes back as a [`CorruptHead`], for the caller to
    /// refuse, instead of failing the whole scan.
    pub async fn unsigned_heads(
        &self,
        events_prefix: &str,
        every: Duration,
        limit: u32,
        skip: &[(WorkflowId, Seq)],
    ) -> Result<Vec<std::result::Result<UnsignedHead, CorruptHead>>> {
        let (skip_ids, skip_seqs): (Vec<&str>, Vec<i64>) = skip
            .iter()
            .map(|(id, seq)| (id.as_str(), i64::try_from(seq.get()).unwrap_or(i64::MAX)))
            .unzip();
        let rows: Vec<(String, i64, Vec<u8>, String)> = sqlx::query_as(
            "SELECT workflow_id, next_seq - 1, head_hash, status FROM workflows
              WHERE signature_open AND checkpoint_seq < next_seq - 1
                AND left(events_subject, length($1)) = $1
                AND (status IN ('completed', 'compensated', 'failed', 'cancelled')
                     OR checkpoint_at IS NULL AND created_at < now() - make_interval(secs => $2)
                     OR checkpoint_at < now() - make_interval(secs => $2))
                AND (workflow_id, next_seq - 1) NOT IN
                    (SELECT * FROM UNNEST($4::text[], $5::bigint[]))
              ORDER BY updated_at LIMIT $3",
        )
        .bind(events_prefix)
        .bind(every.as_secs_f64())
        .bind(i64::from(limit))
        .bind(&skip_ids)
        .bind(&skip_seqs)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .filter_map(|(id, seq, head, status)| {
                // A row whose id or seq does not parse cannot even be named to skip it.
                let (Ok(workflow_id), Some(seq)) = (
                    WorkflowId::new(id.clone()),
                    u64::try_from(seq).ok().and_then(|s| Seq::new(s).ok()),
                ) else {
                    tracing::error!(workflow_id = %id, seq, "an index row with an invalid id or seq: not signed");
                    return None;
                };
                let corrupt = |reason: String| CorruptHead {
                    workflow_id: workflow_id.clone(),
                    seq,
                    reason,
                };
                let head_hash = match ChainHash::from_slice(&head) {
                    Ok(hash) => hash,
                    Err(error) => return Some(Err(corrupt(error.to_string()))),
                };
                let Ok(status) = status.parse() else {
                    return Some(Err(corrupt(format!("status {status:?}"))));
                };
                Some(Ok(UnsignedHead {
                    workflow_id,
                    seq,
                    head_hash,
                    status,
                }))
            })
            .collect())
    }

    /// Stores `checkpoint`, moves the workflow's checkpoint mark, and writes `witness`
    /// to the outbox claimed by `claimer` (who publishes it; a relay does if it dies):
    /// one transaction. Returns the outbox row id, or `None` when this checkpoint was
    /// already stored.
    pub async fn record_checkpoint(
        &self,
        checkpoint: &Checkpoint,
        witness: &OutboxMessage,
        claimer: &str,
        lease: Duration,
    ) -> Result<Option<i64>> {
        let mut tx = self.pool.begin().await?;
        let inserted = sqlx::query(
            "INSERT INTO audit_checkpoints (workflow_id, seq, head_hash, key_id, signature)
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
        )
        .bind(checkpoint.workflow_id.as_str())
        .bind(to_i64(checkpoint.seq))
        .bind(checkpoint.head_hash.as_bytes().as_slice())
        .bind(&checkpoint.key_id)
        .bind(&checkpoint.signature)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "UPDATE workflows SET checkpoint_seq = $2, checkpoint_at = now()
              WHERE workflow_id = $1 AND checkpoint_seq < $2",
        )
        .bind(checkpoint.workflow_id.as_str())
        .bind(to_i64(checkpoint.seq))
        .execute(&mut *tx)
        .await?;
        if inserted.rows_affected() == 0 {
            tx.commit().await?;
            return Ok(None);
        }
        let (id,): (i64,) = sqlx::query_as(
            "INSERT INTO outbox (workflow_id, subject, msg_id, payload, claimed_by, claim_expires_at)
             VALUES ($1, $2, $3, $4, $5, now() + make_interval(secs => $6)) RETURNING id",
        )
        .bind(checkpoint.workflow_id.as_str())
        .bind(&witness.subject)
        .bind(&witness.msg_id)
        .bind(&witness.payload)
        .bind(claimer)
        .bind(lease.as_secs_f64())
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Some(id))
    }

    /// The workflow's latest checkpoint, if any.
    pub async fn latest_checkpoint(
        &self,
        workflow_id: &WorkflowId,
    ) -> Result<Option<StoredCheckpoint>> {
        let row: Option<CheckpointRow> = sqlx::query_as(
            "SELECT workflow_id, seq, head_hash, key_id, signature, signed_at
               FROM audit_checkpoints WHERE workflow_id = $1 ORDER BY seq DESC LIMIT 1",
        )
        .bind(workflow_id.as_str())
        .fetch_optional(&self.pool)
        .await?;
        row.map(to_checkpoint).transpose()
    }
}
