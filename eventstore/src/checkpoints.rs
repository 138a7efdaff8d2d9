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

    /// Of the ended workflows whose id starts with `prefix`, how many still wait for the
    /// checkpoint of their last event (the checkpointer's backlog, which stays small
    /// when signing keeps up with the ends) and how many have a checkpoint (none: no
    /// checkpointer signs them).
    pub async fn count_signing_backlog(&self, prefix: &str) -> Result<(i64, i64)> {
        let pattern = crate::index::like_prefix(prefix);
        let counts: (i64, i64) = sqlx::query_as(
            "SELECT count(*) FILTER (WHERE signature_open AND checkpoint_seq < next_seq - 1),
                    count(*) FILTER (WHERE checkpoint_seq > 0)
               FROM workflows
              WHERE workflow_id LIKE $1
                AND status IN ('completed', 'compensated', 'failed', 'cancelled')",
        )
        .bind(&pattern)
        .fetch_one(&self.pool)
        .await?;
        Ok(counts)
    }

    /// Stores `signed` checkpoints (each with its witness message, at most one per
    /// workflow), moves their workflows' checkpoint marks, and writes the witnesses of
    /// the newly stored ones to the outbox claimed by `claimer` (who publishes them; a
    /// relay does if it dies): one transaction, one commit for the whole batch. Returns
    /// the outbox row id of each newly stored checkpoint's witness, by its position in
    /// `signed`; a checkpoint already stored gets none.
    pub async fn record_checkpoints(
        &self,
        signed: &[(Checkpoint, OutboxMessage)],
        claimer: &str,
        lease: Duration,
    ) -> Result<Vec<(usize, i64)>> {
        if signed.is_empty() {
            return Ok(Vec::new());
        }
        // In workflow id order (bytewise, as the lock below sorts them).
        let mut order: Vec<usize> = (0..signed.len()).collect();
        order.sort_by(|&a, &b| {
            let (a, b) = (&signed[a].0, &signed[b].0);
            (a.workflow_id.as_str(), a.seq).cmp(&(b.workflow_id.as_str(), b.seq))
        });
        let ids: Vec<&str> = order
            .iter()
            .map(|&i| signed[i].0.workflow_id.as_str())
            .collect();
        let seqs: Vec<i64> = order.iter().map(|&i| to_i64(signed[i].0.seq)).collect();
        let hashes: Vec<&[u8]> = order
            .iter()
            .map(|&i| signed[i].0.head_hash.as_bytes().as_slice())
            .collect();
        let key_ids: Vec<&str> = order.iter().map(|&i| signed[i].0.key_id.as_str()).collect();
        let signatures: Vec<&[u8]> = order
            .iter()
            .map(|&i| signed[i].0.signature.as_slice())
            .collect();

        let mut tx = self.pool.begin().await?;
        // The index rows locked first, in id order (ORDER BY under FOR ... UPDATE locks
        // as it returns): the UPDATE ... FROM below would lock in its join's order,
        // whatever the arrays' (seen: "deadlock detected" against the events marks).
        sqlx::query(
            "SELECT 1 FROM workflows WHERE workflow_id = ANY($1)
              ORDER BY workflow_id COLLATE \"C\" FOR NO KEY UPDATE",
        )
        .bind(&ids)
        .execute(&mut *tx)
        .await?;
        let stored: Vec<(String, i64)> = sqlx::query_as(
            "INSERT INTO audit_checkpoints (workflow_id, seq, head_hash, key_id, signature)
             SELECT * FROM UNNEST($1::text[], $2::bigint[], $3::bytea[], $4::text[], $5::bytea[])
             ON CONFLICT DO NOTHING RETURNING workflow_id, seq",
        )
        .bind(&ids)
        .bind(&seqs)
        .bind(&hashes)
        .bind(&key_ids)
        .bind(&signatures)
        .fetch_all(&mut *tx)
        .await?;
        sqlx::query(
            "UPDATE workflows w SET checkpoint_seq = c.seq, checkpoint_at = now()
               FROM UNNEST($1::text[], $2::bigint[]) AS c(workflow_id, seq)
              WHERE w.workflow_id = c.workflow_id AND w.checkpoint_seq < c.seq",
        )
        .bind(&ids)
        .bind(&seqs)
        .execute(&mut *tx)
        .await?;
        let stored: std::collections::BTreeSet<(String, i64)> = stored.into_iter().collect();
        let new: Vec<usize> = order
            .iter()
            .copied()
            .filter(|&i| {
                let checkpoint = &signed[i].0;
                stored.contains(&(
                    checkpoint.workflow_id.as_str().to_owned(),
                    to_i64(checkpoint.seq),
                ))
            })
            .collect();
        if new.is_empty() {
            tx.commit().await?;
            return Ok(Vec::new());
        }
        let witness_ids: Vec<&str> = new
            .iter()
            .map(|&i| signed[i].0.workflow_id.as_str())
            .collect();
        let subjects: Vec<&str> = new.iter().map(|&i| signed[i].1.subject.as_str()).collect();
        let msg_ids: Vec<&str> = new.iter().map(|&i| signed[i].1.msg_id.as_str()).collect();
        let payloads: Vec<&[u8]> = new
            .iter()
            .map(|&i| signed[i].1.payload.as_slice())
            .collect();
        let rows: Vec<(i64, String)> = sqlx::query_as(
            "INSERT INTO outbox (workflow_id, subject, msg_id, payload, claimed_by, claim_expires_at)
             SELECT w.workflow_id, w.subject, w.msg_id, w.payload, $5,
                    now() + make_interval(secs => $6)
               FROM UNNEST($1::text[], $2::text[], $3::text[], $4::bytea[])
                    AS w(workflow_id, subject, msg_id, payload)
             RETURNING id, msg_id",
        )
        .bind(&witness_ids)
        .bind(&subjects)
        .bind(&msg_ids)
        .bind(&payloads)
        .bind(claimer)
        .bind(lease.as_secs_f64())
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        let row_of: std::collections::BTreeMap<String, i64> =
            rows.into_iter().map(|(id, msg_id)| (msg_id, id)).collect();
        Ok(new
            .into_iter()
            .filter_map(|i| row_of.get(&signed[i].1.msg_id).map(|&row| (i, row)))
            .collect())
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
