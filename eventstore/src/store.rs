//! The store handle: a connection pool to the application role's database.

use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::Connection;

use crate::error::Result;
use crate::group::{self, GroupCommit, GroupStats};

/// How long a pooled connection may sit unused before it is pinged on its next use.
pub(crate) const IDLE_BEFORE_PING: Duration = Duration::from_secs(1);

/// Entry point for every event store operation. Cheap to clone (it shares one pool).
#[derive(Debug, Clone)]
pub struct EventStore {
    pub(crate) pool: PgPool,
    /// Appends decided on a known index go through this, when set: see [`crate::group`].
    pub(crate) group: Option<Arc<GroupCommit>>,
}

impl EventStore {
    /// Connects with up to `max_connections` pooled connections.
    ///
    /// `url` is the application role's URL (`HCPFLOW_DATABASE_URL`): it may only read
    /// and append the event log, which the database itself enforces.
    pub async fn connect(url: &str, max_connections: u32) -> Result<Self> {
        let pool = pool_options(max_connections).connect(url).await?;
        Ok(Self { pool, group: None })
    }

    /// Wraps an existing pool.
    pub fn from_pool(pool: PgPool) -> Self {
        Self { pool, group: None }
    }

    /// Connects with `max_connections` in all, `writers` of them the group-commit
    /// writers' own ([`EventStore::with_group_commit`]) and the rest the shared pool's
    /// (at least one: a `max_connections` under `writers + 1` is raised to it).
    pub async fn connect_with_group_commit(
        url: &str,
        max_connections: u32,
        writers: usize,
    ) -> Result<Self> {
        Self::connect(url, shared_pool_size(max_connections, writers))
            .await?
            .with_group_commit(writers)
            .await
    }

    /// This store, with appends of different workflows that arrive together written as
    /// one statement and one commit, one group at a time, the other writers spares
    /// for when a write stalls (see [`crate::group`]). The writers write on `writers`
    /// connections of their own, to the same database, beside the store's pool; one is
    /// opened here. Needs a Tokio runtime; clones share the writer.
    pub async fn with_group_commit(mut self, writers: usize) -> Result<Self> {
        let writers = writers.max(1);
        let connections = group::open_writers_pool(
            pool_options(u32::try_from(writers).unwrap_or(u32::MAX)),
            &self.pool,
        )
        .await?;
        self.group = Some(Arc::new(GroupCommit::start(connections, writers)));
        Ok(self)
    }

    /// What the group writer did so far (groups and the appends in them), if it runs.
    pub fn group_stats(&self) -> Option<Arc<GroupStats>> {
        self.group.as_ref().map(|group| group.stats.clone())
    }

    /// The group writers' own connections, if they run (every statement on them plans
    /// by key, see [`crate::group`]): for tests and diagnostics only, a statement run
    /// on them holds a writer's connection.
    #[doc(hidden)]
    pub fn writers_pool(&self) -> Option<&PgPool> {
        self.group.as_ref().map(|group| group.writers_pool())
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }
}

/// The shared pool's part of `max_connections` when `writers` (at least one) have
/// connections of their own: the rest, and at least one.
fn shared_pool_size(max_connections: u32, writers: usize) -> u32 {
    let writers = u32::try_from(writers.max(1)).unwrap_or(u32::MAX);
    max_connections.saturating_sub(writers).max(1)
}

/// The options of every pool the store opens: up to `max_connections`, each checked
/// before use only when it sat idle.
fn pool_options(max_connections: u32) -> PgPoolOptions {
    PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(Duration::from_secs(10))
        // A ping before every use would be a round trip per step: only a connection
        // that sat idle (long enough for Postgres to have restarted meanwhile) is
        // checked, and replaced when the check fails.
        .test_before_acquire(false)
        .before_acquire(|conn, meta| {
            Box::pin(async move {
                if meta.idle_for < IDLE_BEFORE_PING {
                    return Ok(true);
                }
                Ok(conn.ping().await.is_ok())
            })
        })
}

#[cfg(test)]
mod tests {
    use super::shared_pool_size;

    #[test]
    fn the_writers_connections_count_in_the_pool_size() {
        assert_eq!(shared_pool_size(40, 2), 38);
        assert_eq!(shared_pool_size(3, 2), 1);
        assert_eq!(shared_pool_size(2, 2), 1, "the others keep one");
    }
}
