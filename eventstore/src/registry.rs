//! The cluster registry (DESIGN.md §3): cluster name → infra id, namespace, the create
//! workflow and the cluster's state. A name is live until its cluster is destroyed; a
//! second live cluster of a name is refused by a unique index, so two creates racing
//! for a name cannot both win.

use chrono::{DateTime, Utc};
use hcpflow_engine::{TenantId, WorkflowId};

use crate::error::{Error, Result};
use crate::store::EventStore;

/// Where a cluster is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClusterState {
    Creating,
    Ready,
    Destroying,
    Destroyed,
    /// A create that failed and left something (kept on failure, or a compensation
    /// that could not be done): the name stays taken until a destroy.
    Failed,
}

impl ClusterState {
    pub fn as_str(self) -> &'static str {
        match self {
            ClusterState::Creating => "creating",
            ClusterState::Ready => "ready",
            ClusterState::Destroying => "destroying",
            ClusterState::Destroyed => "destroyed",
            ClusterState::Failed => "failed",
        }
    }

    fn parse(text: &str) -> Result<Self> {
        Ok(match text {
            "creating" => ClusterState::Creating,
            "ready" => ClusterState::Ready,
            "destroying" => ClusterState::Destroying,
            "destroyed" => ClusterState::Destroyed,
            "failed" => ClusterState::Failed,
            other => {
                return Err(Error::InvalidInput(format!(
                    "unknown cluster state {other:?} in the registry"
                )))
            }
        })
    }
}

/// One registry row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterRecord {
    pub name: String,
    pub infra_id: String,
    pub namespace: String,
    pub create_workflow_id: WorkflowId,
    pub state: ClusterState,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// The tenant of the create workflow, which owns the cluster.
    pub tenant: TenantId,
}

/// What registering a name found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Registration {
    /// Registered now, or already by this same create (a retry).
    Registered(ClusterRecord),
    /// Another live cluster has the name.
    Taken(ClusterRecord),
}

type Row = (
    String,
    String,
    String,
    String,
    String,
    DateTime<Utc>,
    DateTime<Utc>,
    String,
);

const SELECT: &str = "SELECT r.name, r.infra_id, r.namespace, r.create_workflow_id, r.state,
                               r.created_at, r.updated_at, COALESCE(w.tenant, 'default')
                          FROM cluster_registry r
                          LEFT JOIN workflows w ON w.workflow_id = r.create_workflow_id";

fn record(row: Row) -> Result<ClusterRecord> {
    let (name, infra_id, namespace, create_workflow_id, state, created_at, updated_at, tenant) =
        row;
    Ok(ClusterRecord {
        name,
        infra_id,
        namespace,
        create_workflow_id: WorkflowId::new(create_workflow_id)
            .map_err(|e| Error::InvalidInput(format!("registry row: {e}")))?,
        state: ClusterState::parse(&state)?,
        created_at,
        updated_at,
        tenant: TenantId::new(tenant)
            .map_err(|e| Error::InvalidInput(format!("registry row: {e}")))?,
    })
}

impl EventStore {
    /// Registers `name` for the create `create_workflow_id` (state `creating`).
    ///
    /// Guarantees: idempotent for the same create; exactly one of two creates racing
    /// for a name is registered.
    pub async fn register_cluster(
        &self,
        name: &str,
        infra_id: &str,
        namespace: &str,
        create_workflow_id: &WorkflowId,
    ) -> Result<Registration> {
        let inserted = sqlx::query(
            "INSERT INTO cluster_registry (create_workflow_id, name, infra_id, namespace, state)
             VALUES ($1, $2, $3, $4, 'creating')
             ON CONFLICT DO NOTHING",
        )
        .bind(create_workflow_id.as_str())
        .bind(name)
        .bind(infra_id)
        .bind(namespace)
        .execute(&self.pool)
        .await?;
        if inserted.rows_affected() == 1 {
            return Ok(Registration::Registered(
                self.cluster_by_workflow(create_workflow_id).await?,
            ));
        }
        let mine = self.cluster_by_workflow(create_workflow_id).await;
        match mine {
            Ok(record) if record.name == name => Ok(Registration::Registered(record)),
            _ => match self.live_cluster(name).await? {
                Some(other) => Ok(Registration::Taken(other)),
                // The other holder went away between the insert and the read.
                None => {
                    Box::pin(self.register_cluster(name, infra_id, namespace, create_workflow_id))
                        .await
                }
            },
        }
    }

    /// The registry row of a create.
    pub async fn cluster_by_workflow(
        &self,
        create_workflow_id: &WorkflowId,
    ) -> Result<ClusterRecord> {
        let row: Option<Row> = sqlx::query_as(&format!("{SELECT} WHERE r.create_workflow_id = $1"))
            .bind(create_workflow_id.as_str())
            .fetch_optional(&self.pool)
            .await?;
        row.map(record)
            .transpose()?
            .ok_or_else(|| Error::NotFound(create_workflow_id.clone()))
    }

    /// The live (not destroyed) cluster of `name`, if any.
    pub async fn live_cluster(&self, name: &str) -> Result<Option<ClusterRecord>> {
        let row: Option<Row> = sqlx::query_as(&format!(
            "{SELECT} WHERE r.name = $1 AND r.state <> 'destroyed'"
        ))
        .bind(name)
        .fetch_optional(&self.pool)
        .await?;
        row.map(record).transpose()
    }

    /// Clusters, live ones first, then newest first; `name` keeps only that name (its
    /// live cluster and the destroyed ones before it); `include_destroyed` adds the
    /// destroyed ones; `tenant` keeps only that tenant's.
    pub async fn list_clusters(
        &self,
        name: Option<&str>,
        include_destroyed: bool,
        tenant: Option<&TenantId>,
        limit: u32,
    ) -> Result<Vec<ClusterRecord>> {
        let rows: Vec<Row> = sqlx::query_as(&format!(
            "{SELECT} WHERE ($1 OR r.state <> 'destroyed') AND ($2::text IS NULL OR r.name = $2)
                        AND ($4::text IS NULL OR COALESCE(w.tenant, 'default') = $4)
              ORDER BY (r.state = 'destroyed'), r.created_at DESC LIMIT $3"
        ))
        .bind(include_destroyed)
        .bind(name)
        .bind(i64::from(limit))
        .bind(tenant.map(TenantId::as_str))
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter().map(record).collect()
    }

    /// Moves the create's cluster to `state`. Idempotent.
    pub async fn set_cluster_state(
        &self,
        create_workflow_id: &WorkflowId,
        state: ClusterState,
    ) -> Result<ClusterRecord> {
        sqlx::query(
            "UPDATE cluster_registry SET state = $2, updated_at = now()
              WHERE create_workflow_id = $1 AND state <> $2",
        )
        .bind(create_workflow_id.as_str())
        .bind(state.as_str())
        .execute(&self.pool)
        .await?;
        self.cluster_by_workflow(create_workflow_id).await
    }
}
