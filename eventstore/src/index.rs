//! The workflow index: one row per workflow, updated in the same transaction as each
//! append, and the queries that list workflows.

use std::time::Duration;

use chrono::{DateTime, Utc};
use hcpflow_engine::{ChainHash, Seq, TenantId, WorkflowId, WorkflowStatus};
use serde_json::Value;

use crate::error::{Error, Result};
use crate::store::EventStore;

/// A workflow's index row.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkflowSummary {
    pub workflow_id: WorkflowId,
    pub workflow_type: String,
    pub status: WorkflowStatus,
    pub concurrency_key: Option<String>,
    pub parent_id: Option<WorkflowId>,
    pub next_seq: Seq,
    pub head_hash: ChainHash,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub input_digest: Option<String>,
    pub output: Option<Value>,
    pub error: Option<Value>,
    /// Why the workflow is `blocked` (nondeterminism, a panic, a corrupt history).
    pub blocked_reason: Option<String>,
    /// Who owns it: every API read and write is scoped to the caller's tenant.
    pub tenant: TenantId,
}

impl WorkflowSummary {
    /// Whether the index row ends where `events` (the whole log, read with it) does:
    /// its next seq follows their last, and its head hash is their last event's hash.
    pub fn agrees_with_log(&self, events: &[crate::StoredEvent]) -> bool {
        let last = events.last();
        last.map_or(ChainHash::GENESIS, |event| event.hash) == self.head_hash
            && last.map_or(Seq::FIRST, |event| event.seq.next()) == self.next_seq
    }
}

/// Which workflows to list; every set field must match.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkflowFilter {
    pub status: Option<WorkflowStatus>,
    pub workflow_type: Option<String>,
    pub concurrency_key: Option<String>,
    /// Only the workflows whose events go to subjects starting with this
    /// (`<prefix>.events.`): one deployment's, where several share the database.
    pub events_prefix: Option<String>,
    /// Only this tenant's workflows.
    pub tenant: Option<TenantId>,
}

/// One page of workflows, newest first.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkflowPage {
    pub workflows: Vec<WorkflowSummary>,
    /// Pass back to get the next page; `None` at the end.
    pub cursor: Option<String>,
}

pub(crate) type IndexRow = (
    String,
    String,
    String,
    Option<String>,
    Option<String>,
    i64,
    Vec<u8>,
    DateTime<Utc>,
    DateTime<Utc>,
    Option<String>,
    Option<Value>,
    Option<Value>,
    Option<String>,
    String,
);

pub(crate) const SELECT_INDEX: &str =
    "SELECT workflow_id, workflow_type, status, concurrency_key, parent_id,
                                   next_seq, head_hash, created_at, updated_at,
                                   input_digest, output, error, blocked_reason, tenant
                              FROM workflows";

impl EventStore {
    pub async fn get_workflow(&self, workflow_id: &WorkflowId) -> Result<WorkflowSummary> {
        let row: Option<IndexRow> =
            sqlx::query_as(&format!("{SELECT_INDEX} WHERE workflow_id = $1"))
                .bind(workflow_id.as_str())
                .fetch_optional(&self.pool)
                .await?;
        row.map(to_summary)
            .unwrap_or_else(|| Err(Error::NotFound(workflow_id.clone())))
    }

    /// Lists workflows matching `filter`, newest first, `limit` at a time.
    ///
    /// `cursor` is the opaque value of the previous page's `cursor`.
    pub async fn list_workflows(
        &self,
        filter: &WorkflowFilter,
        limit: u32,
        cursor: Option<&str>,
    ) -> Result<WorkflowPage> {
        if limit == 0 {
            return Err(Error::InvalidInput(
                "a workflow page needs a limit of at least 1".into(),
            ));
        }
        let (after_time, after_id) = match cursor {
            Some(text) => {
                let (time, id) = decode_cursor(text)?;
                (Some(time), Some(id))
            }
            None => (None, None),
        };
        let rows: Vec<IndexRow> = sqlx::query_as(&format!(
            "{SELECT_INDEX}
              WHERE ($1::text IS NULL OR status = $1)
                AND ($2::text IS NULL OR workflow_type = $2)
                AND ($3::text IS NULL OR concurrency_key = $3)
                AND ($4::timestamptz IS NULL OR (created_at, workflow_id) < ($4, $5))
                AND ($7::text IS NULL OR left(events_subject, length($7)) = $7)
                AND ($8::text IS NULL OR tenant = $8)
              ORDER BY created_at DESC, workflow_id DESC
              LIMIT $6"
        ))
        .bind(filter.status.map(WorkflowStatus::as_str))
        .bind(filter.workflow_type.as_deref())
        .bind(filter.concurrency_key.as_deref())
        .bind(after_time)
        .bind(after_id)
        .bind(i64::from(limit) + 1)
        .bind(filter.events_prefix.as_deref())
        .bind(filter.tenant.as_ref().map(TenantId::as_str))
        .fetch_all(&self.pool)
        .await?;
        let mut workflows = rows
            .into_iter()
            .map(to_summary)
            .collect::<Result<Vec<_>>>()?;
        let cursor = if workflows.len() > limit as usize {
            workflows.truncate(limit as usize);
            workflows.last().map(encode_cursor)
        } else {
            None
        };
        Ok(WorkflowPage { workflows, cursor })
    }
}

impl EventStore {
    /// Marks a workflow `blocked` with the reason (nondeterminism, a panic, a corrupt
    /// history). Nothing is appended: the history stays as it was, to be resumed by fixed
    /// code. A blocked workflow keeps its concurrency key. An ended workflow stays as it
    /// ended (a late task on an old process during a rolling deploy must not hold its
    /// cluster's key for ever).
    pub async fn set_blocked(&self, workflow_id: &WorkflowId, reason: &str) -> Result<()> {
        sqlx::query(
            "UPDATE workflows SET status = 'blocked', blocked_reason = $2, updated_at = now()
              WHERE workflow_id = $1
                AND status NOT IN ('completed', 'compensated', 'cancelled', 'failed')",
        )
        .bind(workflow_id.as_str())
        .bind(reason)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Clears `blocked` once the code replays the history again.
    pub async fn clear_blocked(
        &self,
        workflow_id: &WorkflowId,
        status: WorkflowStatus,
    ) -> Result<()> {
        sqlx::query(
            "UPDATE workflows SET status = $2, blocked_reason = NULL, updated_at = now()
              WHERE workflow_id = $1 AND status = 'blocked'",
        )
        .bind(workflow_id.as_str())
        .bind(status.as_str())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Live workflows (`running`, `compensating`) of one deployment (their events go to
    /// `events_prefix`) unchanged for at least `idle`, oldest first: what its sweeper
    /// checks for lost tasks.
    pub async fn idle_live_workflows(
        &self,
        events_prefix: &str,
        idle: Duration,
        limit: u32,
    ) -> Result<Vec<WorkflowId>> {
        let ids: Vec<String> = sqlx::query_scalar(
            "SELECT workflow_id FROM workflows
              WHERE events_open AND status IN ('running', 'compensating')
                AND updated_at < now() - make_interval(secs => $1)
                AND left(events_subject, length($3)) = $3
              ORDER BY updated_at LIMIT $2",
        )
        .bind(idle.as_secs_f64())
        .bind(i64::from(limit))
        .bind(events_prefix)
        .fetch_all(&self.pool)
        .await?;
        ids.into_iter().map(stored_workflow_id).collect()
    }

    /// Touches a live workflow's `updated_at`, so the sweeper leaves it alone for a while.
    pub async fn touch(&self, workflow_id: &WorkflowId) -> Result<()> {
        sqlx::query("UPDATE workflows SET updated_at = now() WHERE workflow_id = $1")
            .bind(workflow_id.as_str())
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// The next transaction id Postgres will assign. Only a transaction that writes gets
    /// one (committed or rolled back; a read-only one does not), and the counter is
    /// exact at once, unlike `pg_stat_database`, whose counts arrive up to seconds late:
    /// the benchmark divides the delta by the steps it ran.
    pub async fn next_transaction_id(&self) -> Result<i64> {
        let commits: i64 =
            sqlx::query_scalar("SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint")
                .fetch_one(&self.pool)
                .await?;
        Ok(commits)
    }

    /// How many workflows whose id starts with `prefix` have not ended (a benchmark's
    /// run, by its ids).
    pub async fn count_unfinished_with_prefix(&self, prefix: &str) -> Result<i64> {
        let pattern = like_prefix(prefix);
        let unfinished: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM workflows WHERE workflow_id LIKE $1 \
             AND status IN ('pending', 'running', 'compensating')",
        )
        .bind(pattern)
        .fetch_one(&self.pool)
        .await?;
        Ok(unfinished)
    }

    /// Whether a commit here survives a crash of the machine: Postgres's `fsync` and
    /// `synchronous_commit` settings, as this connection sees them. A benchmark on a
    /// database without both measures commits that are not durable.
    pub async fn durability(&self) -> Result<Durability> {
        let (fsync, synchronous_commit): (String, String) = sqlx::query_as(
            "SELECT current_setting('fsync'), current_setting('synchronous_commit')",
        )
        .fetch_one(&self.pool)
        .await?;
        Ok(Durability {
            fsync,
            synchronous_commit,
        })
    }

    /// How the servers' group-commit writers (application name `…-writer`) are
    /// connected: over the Unix socket of a Postgres on their host, or over TCP with or
    /// without TLS. A step's commit is a round trip on one of them, and at one workflow
    /// in flight the transport shows in its latency (README, configuration). Counts the
    /// connections this role may see (its own, or all with `pg_read_all_stats`).
    pub async fn writer_transports(&self) -> Result<WriterTransports> {
        let (unix_socket, tcp_tls, tcp_plain): (i64, i64, i64) = sqlx::query_as(
            "SELECT count(*) FILTER (WHERE a.client_port = -1),
                    count(*) FILTER (WHERE a.client_port > 0 AND s.ssl),
                    count(*) FILTER (WHERE a.client_port > 0 AND NOT s.ssl)
               FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid)
              WHERE a.datname = current_database() AND a.application_name LIKE $1",
        )
        .bind(format!(
            "%{}",
            escape_like(crate::group::WRITER_NAME_SUFFIX)
        ))
        .fetch_one(&self.pool)
        .await?;
        Ok(WriterTransports {
            unix_socket,
            tcp_tls,
            tcp_plain,
        })
    }
}

/// How the group-commit writers' connections of the servers on this database reach
/// it (see [`EventStore::writer_transports`]): each connection counted once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriterTransports {
    pub unix_socket: i64,
    pub tcp_tls: i64,
    pub tcp_plain: i64,
}

impl std::fmt::Display for WriterTransports {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kinds = [
            (self.unix_socket, "Unix socket"),
            (self.tcp_tls, "TCP with TLS"),
            (self.tcp_plain, "TCP without TLS"),
        ];
        let seen: Vec<String> = kinds
            .iter()
            .filter(|(count, _)| *count > 0)
            .map(|(count, kind)| format!("{kind} ({count})"))
            .collect();
        if seen.is_empty() {
            f.write_str("none seen")
        } else {
            f.write_str(&seen.join(", "))
        }
    }
}

/// Postgres's durability settings (see [`EventStore::durability`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Durability {
    pub fsync: String,
    pub synchronous_commit: String,
}

impl Durability {
    /// A commit is on disk when Postgres answers it: `fsync` on and `synchronous_commit`
    /// not `off` (`on`, `local`, `remote_write` and `remote_apply` all flush the local
    /// WAL before answering).
    pub fn is_durable(&self) -> bool {
        self.fsync == "on" && self.synchronous_commit != "off"
    }
}

fn encode_cursor(last: &WorkflowSummary) -> String {
    format!(
        "{}~{}",
        last.created_at.timestamp_micros(),
        last.workflow_id
    )
}

fn decode_cursor(text: &str) -> Result<(DateTime<Utc>, String)> {
    let invalid =
        || Error::InvalidInput(format!("cursor {text:?} was not issued by a workflow list"));
    let (micros, id) = text.split_once('~').ok_or_else(invalid)?;
    let micros: i64 = micros.parse().map_err(|_| invalid())?;
    let time = DateTime::from_timestamp_micros(micros).ok_or_else(invalid)?;
    let id = WorkflowId::new(id).map_err(|_| invalid())?;
    Ok((time, id.as_str().to_owned()))
}

pub(crate) fn to_summary(row: IndexRow) -> Result<WorkflowSummary> {
    let (
        id,
        workflow_type,
        status,
        concurrency_key,
        parent_id,
        next_seq,
        head_hash,
        created_at,
        updated_at,
        input_digest,
        output,
        error,
        blocked_reason,
        tenant,
    ) = row;
    let corrupt = |reason: String| Error::Corrupt {
        workflow_id: id.clone(),
        seq: 0,
        reason: format!("index row: {reason}"),
    };
    Ok(WorkflowSummary {
        workflow_id: WorkflowId::new(id.clone()).map_err(|e| corrupt(e.to_string()))?,
        workflow_type,
        status: status
            .parse()
            .map_err(|e: hcpflow_engine::status::UnknownStatus| corrupt(e.to_string()))?,
        concurrency_key,
        parent_id: parent_id
            .map(WorkflowId::new)
            .transpose()
            .map_err(|e| corrupt(e.to_string()))?,
        next_seq: u64::try_from(next_seq)
            .ok()
            .and_then(|n| Seq::new(n).ok())
            .ok_or_else(|| corrupt(format!("invalid next_seq {next_seq}")))?,
        head_hash: ChainHash::from_slice(&head_hash).map_err(|e| corrupt(e.to_string()))?,
        created_at,
        updated_at,
        input_digest,
        output,
        error,
        blocked_reason,
        tenant: TenantId::new(tenant).map_err(|e| corrupt(e.to_string()))?,
    })
}

/// A workflow id read from a table: one that does not parse is refused, not trusted.
pub(crate) fn stored_workflow_id(id: String) -> Result<WorkflowId> {
    WorkflowId::new(id).map_err(|e| Error::InvalidInput(format!("stored workflow id: {e}")))
}

/// A LIKE pattern for the values that start with `prefix` (its wildcards escaped).
pub(crate) fn like_prefix(prefix: &str) -> String {
    format!("{}%", escape_like(prefix))
}

/// `text` with LIKE's wildcards (and its escape character) escaped.
fn escape_like(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('%', "\\%")
        .replace('_', "\\_")
}

#[cfg(test)]
mod tests {
    use super::WriterTransports;

    #[test]
    fn writer_transports_name_each_kind_seen() {
        assert_eq!(WriterTransports::default().to_string(), "none seen");
        let mixed = WriterTransports {
            unix_socket: 2,
            tcp_tls: 0,
            tcp_plain: 1,
        };
        assert_eq!(mixed.to_string(), "Unix socket (2), TCP without TLS (1)");
    }
}
