//! The resource ledger: every cloud or Kubernetes object a workflow created or deleted,
//! and every one it observed made by another owner, written with the event that
//! records it.

use std::fmt;

use chrono::{DateTime, Utc};
use hcpflow_engine::{Seq, WorkflowId};

use crate::error::Result;
use crate::store::EventStore;
use crate::timers::to_i64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LedgerAction {
    Created,
    Deleted,
    /// Made by another owner (see [`LedgerEntry::owner`]), seen by the activity.
    Observed,
}

impl LedgerAction {
    pub fn as_str(self) -> &'static str {
        match self {
            LedgerAction::Created => "created",
            LedgerAction::Deleted => "deleted",
            LedgerAction::Observed => "observed",
        }
    }
}

impl fmt::Display for LedgerAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One object created, deleted or observed by the activity at `seq`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerEntry {
    pub seq: Seq,
    pub attempt: u32,
    pub action: LedgerAction,
    /// `aws` or `kubernetes`.
    pub provider: String,
    /// `ec2:vpc`, `iam:role`, `hostedcluster`, ...
    pub kind: String,
    /// The id or ARN.
    pub resource_id: String,
    pub region: Option<String>,
    pub cluster: Option<String>,
    /// Who made and deletes an observed object (`hypershift`); `None` for our own.
    pub owner: Option<String>,
}

/// A ledger row as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerRecord {
    pub workflow_id: String,
    pub entry: LedgerEntry,
    pub recorded_at: DateTime<Utc>,
}

pub(crate) async fn insert(
    conn: &mut sqlx::PgConnection,
    workflow_id: &WorkflowId,
    entries: &[LedgerEntry],
) -> Result<()> {
    if entries.is_empty() {
        return Ok(());
    }
    let seqs: Vec<i64> = entries.iter().map(|e| to_i64(e.seq)).collect();
    let attempts: Vec<i32> = entries
        .iter()
        .map(|e| i32::try_from(e.attempt).unwrap_or(i32::MAX))
        .collect();
    let actions: Vec<&str> = entries.iter().map(|e| e.action.as_str()).collect();
    let providers: Vec<&str> = entries.iter().map(|e| e.provider.as_str()).collect();
    let kinds: Vec<&str> = entries.iter().map(|e| e.kind.as_str()).collect();
    let ids: Vec<&str> = entries.iter().map(|e| e.resource_id.as_str()).collect();
    let regions: Vec<Option<&str>> = entries.iter().map(|e| e.region.as_deref()).collect();
    let clusters: Vec<Option<&str>> = entries.iter().map(|e| e.cluster.as_deref()).collect();
    let owners: Vec<Option<&str>> = entries.iter().map(|e| e.owner.as_deref()).collect();
    sqlx::query(
        "INSERT INTO resource_ledger
                (workflow_id, seq, attempt, action, provider, kind, resource_id, region, cluster,
                 owner)
         SELECT $1, * FROM UNNEST($2::bigint[], $3::int[], $4::text[], $5::text[], $6::text[],
                                  $7::text[], $8::text[], $9::text[], $10::text[])",
    )
    .bind(workflow_id.as_str())
    .bind(&seqs)
    .bind(&attempts)
    .bind(&actions)
    .bind(&providers)
    .bind(&kinds)
    .bind(&ids)
    .bind(&regions)
    .bind(&clusters)
    .bind(&owners)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

type LedgerRow = (
    String,
    i64,
    i32,
    String,
    String,
    String,
    String,
    Option<String>,
    Option<String>,
    Option<String>,
    DateTime<Utc>,
);

fn from_row(row: LedgerRow) -> LedgerRecord {
    let (
        workflow_id,
        seq,
        attempt,
        action,
        provider,
        kind,
        resource_id,
        region,
        cluster,
        owner,
        at,
    ) = row;
    LedgerRecord {
        workflow_id,
        entry: LedgerEntry {
            // The table's CHECK constraints keep seq and attempt at 1 or more.
            seq: u64::try_from(seq)
                .ok()
                .and_then(|s| Seq::new(s).ok())
                .unwrap_or(Seq::FIRST),
            attempt: u32::try_from(attempt).unwrap_or(1),
            // The table's CHECK constraint keeps action to these three.
            action: match action.as_str() {
                "deleted" => LedgerAction::Deleted,
                "observed" => LedgerAction::Observed,
                _ => LedgerAction::Created,
            },
            provider,
            kind,
            resource_id,
            region,
            cluster,
            owner,
        },
        recorded_at: at,
    }
}

const SELECT_LEDGER: &str = "SELECT workflow_id, seq, attempt, action, provider, kind,
                                    resource_id, region, cluster, owner,
                                    recorded_at
                               FROM resource_ledger";

impl EventStore {
    /// Every ledger row of one workflow, in the order they were written.
    pub async fn ledger_for_workflow(&self, workflow_id: &WorkflowId) -> Result<Vec<LedgerRecord>> {
        let rows: Vec<LedgerRow> = sqlx::query_as(&format!(
            "{SELECT_LEDGER} WHERE workflow_id = $1 ORDER BY id"
        ))
        .bind(workflow_id.as_str())
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().map(from_row).collect())
    }

    /// Every ledger row that names `cluster`, across all its workflows.
    pub async fn ledger_for_cluster(&self, cluster: &str) -> Result<Vec<LedgerRecord>> {
        let rows: Vec<LedgerRow> =
            sqlx::query_as(&format!("{SELECT_LEDGER} WHERE cluster = $1 ORDER BY id"))
                .bind(cluster)
                .fetch_all(&self.pool)
                .await?;
        Ok(rows.into_iter().map(from_row).collect())
    }
}
