//! The store handle: a connection pool to the application role's database.

use std::time::Duration;

use sqlx::postgres::{PgPool, PgPoolOptions};

use crate::error::Result;

/// Entry point for every event store operation. Cheap to clone (it shares one pool).
#[derive(Debug, Clone)]
pub struct EventStore {
    pub(crate) pool: PgPool,
}

impl EventStore {
    /// Connects with up to `max_connections` pooled connections.
    ///
    /// `url` is the application role's URL (`HCPFLOW_DATABASE_URL`): it may only read
    /// and append the event log, which the database itself enforces.
    pub async fn connect(url: &str, max_connections: u32) -> Result<Self> {
        let pool = PgPoolOptions::new()
            .max_connections(max_connections)
            .acquire_timeout(Duration::from_secs(10))
            .connect(url)
            .await?;
        Ok(Self { pool })
    }

    /// Wraps an existing pool.
    pub fn from_pool(pool: PgPool) -> Self {
        Self { pool }
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }
}
