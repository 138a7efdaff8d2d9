//! What the store knows of the seal keys: the known value each key sealed when a process
//! first ran with it (the start-up check opens it again), and which key ids the live
//! workflows' histories still hold sealed values of (`hcpflow seal status`: when an old
//! key may go).

use chrono::{DateTime, Utc};

use crate::error::Result;
use crate::store::EventStore;

/// A key id that live workflows still need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyInUse {
    pub key_id: String,
    /// Workflows not ended whose histories hold a value sealed with the key.
    pub workflows: i64,
    /// When the oldest such value was recorded.
    pub oldest: DateTime<Utc>,
}

impl EventStore {
    /// The check value recorded for `key_id`: `offered` if none was, else the one the
    /// first process with that key recorded (whichever of racing processes won).
    pub async fn seal_key_check(&self, key_id: &str, offered: &str) -> Result<String> {
        sqlx::query(
            "INSERT INTO seal_key_checks (key_id, sealed) VALUES ($1, $2)
             ON CONFLICT (key_id) DO NOTHING",
        )
        .bind(key_id)
        .bind(offered)
        .execute(&self.pool)
        .await?;
        Ok(
            sqlx::query_scalar("SELECT sealed FROM seal_key_checks WHERE key_id = $1")
                .bind(key_id)
                .fetch_one(&self.pool)
                .await?,
        )
    }

    /// Every key id recorded with its check value (`(key id, sealed value)`).
    pub async fn checked_seal_keys(&self) -> Result<Vec<(String, String)>> {
        Ok(
            sqlx::query_as("SELECT key_id, sealed FROM seal_key_checks ORDER BY key_id")
                .fetch_all(&self.pool)
                .await?,
        )
    }

    /// Every key id a sealed value in a live (not ended) workflow's history names. A
    /// scan of those histories: an operator's question, not a hot path.
    pub async fn seal_keys_in_use(&self) -> Result<Vec<KeyInUse>> {
        let rows: Vec<(String, i64, DateTime<Utc>)> = sqlx::query_as(
            r#"SELECT found[1], count(DISTINCT e.workflow_id), min(e.recorded_at)
                 FROM events e
                 JOIN workflows w ON w.workflow_id = e.workflow_id
                 CROSS JOIN LATERAL regexp_matches(
                     convert_from(e.body, 'UTF8'),
                     'sealed:v[12]:([A-Za-z0-9_-]+):[A-Za-z0-9_-]{38,}', 'g') AS found
                WHERE w.status NOT IN ('completed', 'compensated', 'cancelled', 'failed')
                GROUP BY found[1]
                ORDER BY found[1]"#,
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(key_id, workflows, oldest)| KeyInUse {
                key_id,
                workflows,
                oldest,
            })
            .collect())
    }
}
