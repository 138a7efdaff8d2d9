//! How much disk each of hcpflow's tables takes, for the soak's watch on storage that
//! grows without bound.

use crate::error::Result;
use crate::retention;
use crate::store::EventStore;

/// One table's size on disk (its heap with TOAST, and its indexes), in bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableSize {
    pub table: String,
    pub heap_bytes: i64,
    pub index_bytes: i64,
}

impl TableSize {
    pub fn total(&self) -> i64 {
        self.heap_bytes + self.index_bytes
    }

    /// Whether the relay purges this table's done rows after the retention
    /// (`--done-retention-secs`): it should stop growing once that much time has passed.
    /// The others (the event log, the index, the ledger, checkpoints) are kept.
    pub fn is_purged(&self) -> bool {
        retention::PURGED_TABLES.contains(&self.table.as_str())
    }
}

impl EventStore {
    /// The sizes of the tables in the schema hcpflow uses, by name.
    pub async fn table_sizes(&self) -> Result<Vec<TableSize>> {
        let rows: Vec<(String, i64, i64)> = sqlx::query_as(
            "SELECT c.relname::text, pg_table_size(c.oid), pg_indexes_size(c.oid)
               FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
              WHERE c.relkind IN ('r', 'p') AND n.nspname = current_schema()
                AND c.relname NOT LIKE '\\_sqlx%'
              ORDER BY c.relname",
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(table, heap_bytes, index_bytes)| TableSize {
                table,
                heap_bytes,
                index_bytes,
            })
            .collect())
    }
}
