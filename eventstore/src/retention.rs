//! What nobody needs any more, deleted after a retention: outbox rows published,
//! timers fired, and attempt claims whose lease ran out. Each of these tables gets rows
//! with every step; without this they would grow for ever.

use std::time::Duration;

use crate::error::Result;
use crate::store::EventStore;

/// The tables whose done rows [`EventStore::purge_done`] deletes.
pub const PURGED_TABLES: [&str; 3] = ["outbox", "timers", "attempt_claims"];

/// How many rows one call deletes at most from each table, so that a backlog is worked
/// off in short transactions (call again while [`Purged::backlog`] says so).
pub const PURGE_BATCH: i64 = 10_000;

/// What one purge deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Purged {
    pub outbox: u64,
    pub timers: u64,
    pub attempt_claims: u64,
}

impl Purged {
    pub fn total(&self) -> u64 {
        self.outbox + self.timers + self.attempt_claims
    }

    /// A table had a full batch deleted: there may be more.
    pub fn backlog(&self) -> bool {
        let full = u64::try_from(PURGE_BATCH).unwrap_or(u64::MAX);
        [self.outbox, self.timers, self.attempt_claims]
            .iter()
            .any(|&n| n >= full)
    }
}

impl EventStore {
    /// Deletes outbox rows published, timers fired and claims expired more than
    /// `retention` ago (at most a batch of each). Unpublished rows, unfired timers and
    /// held claims are never touched.
    pub async fn purge_done(&self, retention: Duration) -> Result<Purged> {
        let (outbox, timers, attempt_claims): (i64, i64, i64) = sqlx::query_as(
            "WITH cutoff AS (SELECT now() - make_interval(secs => $1::float8) AS at),
                  o AS (DELETE FROM outbox WHERE id IN (
                            SELECT id FROM outbox
                             WHERE published_at < (SELECT at FROM cutoff) LIMIT $2)
                        RETURNING 1),
                  t AS (DELETE FROM timers WHERE id IN (
                            SELECT id FROM timers
                             WHERE fired_at < (SELECT at FROM cutoff) LIMIT $2)
                        RETURNING 1),
                  c AS (DELETE FROM attempt_claims
                         WHERE (workflow_id, scheduled_seq, attempt) IN (
                            SELECT workflow_id, scheduled_seq, attempt FROM attempt_claims
                             WHERE lease_until < (SELECT at FROM cutoff) LIMIT $2)
                        RETURNING 1)
             SELECT (SELECT count(*) FROM o), (SELECT count(*) FROM t), (SELECT count(*) FROM c)",
        )
        .bind(retention.as_secs_f64())
        .bind(PURGE_BATCH)
        .fetch_one(&self.pool)
        .await?;
        let count = |n: i64| u64::try_from(n).unwrap_or(0);
        Ok(Purged {
            outbox: count(outbox),
            timers: count(timers),
            attempt_claims: count(attempt_claims),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_batch_of_any_table_is_a_backlog() {
        let full = u64::try_from(PURGE_BATCH).unwrap();
        assert!(!Purged::default().backlog());
        assert!(!Purged {
            outbox: full - 1,
            timers: 3,
            attempt_claims: 0
        }
        .backlog());
        assert!(Purged {
            outbox: 0,
            timers: full,
            attempt_claims: 0
        }
        .backlog());
    }
}
