//! The Postgres event store of hcpflow (DESIGN.md §3).
//!
//! Postgres is the truth: a workflow's history is an append-only, hash-chained event log,
//! and everything an append causes — the index row, outbox messages, timers, resource
//! ledger entries — is written in the same transaction.
//!
//! Where to start reading:
//! - [`EventStore`] (`store.rs`): connecting, and the entry point for every operation;
//! - [`append`]: atomic appends with optimistic concurrency on the expected next seq;
//! - [`group`]: group commit — appends of many workflows in one statement and commit;
//! - [`history`]: reading a history page by page, and verifying its hash chain;
//! - [`index`], [`outbox`], [`timers`], [`ledger`]: the tables written alongside;
//! - [`attempt_claims`]: at most one runner runs an activity attempt at a time;
//! - [`retention`]: deleting what nobody needs any more (published, fired, expired);
//! - [`table_sizes`]: the tables' sizes on disk (the soak's storage watch);
//! - [`published`]: how far each workflow's events are on the events stream;
//! - [`registry`]: the cluster registry (name → infra id, create workflow, state);
//! - [`checkpoints`]: signed heads of histories (audit);
//! - [`migrate`]: the embedded migrations and the application role's grants.

pub mod append;
pub mod attempt_claims;
pub mod checkpoints;
mod error;
pub mod group;
pub mod history;
pub mod index;
pub mod ledger;
mod listen;
mod locked;
pub mod migrate;
pub mod outbox;
pub mod published;
pub mod record;
pub mod registry;
pub mod retention;
pub mod seal_keys;
mod shape;
mod store;
pub mod table_sizes;
pub mod timers;

pub use append::{AppendBatch, Appended, ClaimedAttempts, NewWorkflow};
pub use attempt_claims::{AttemptClaim, Claimed};
pub use checkpoints::{CorruptHead, StoredCheckpoint, UnsignedHead};
pub use error::{Error, Result};
pub use history::{HistoryPage, VerifiedHistory};
pub use index::{Durability, WorkflowFilter, WorkflowPage, WorkflowSummary, WriterTransports};
pub use ledger::{LedgerAction, LedgerEntry, LedgerRecord};
pub use listen::Listener;
pub use outbox::{ClaimedMessage, OutboxMessage, OutboxRow, OUTBOX_CHANNEL};
pub use published::{PublishedRange, PublishedRuns, UnpublishedEvents};
pub use record::{entry_bytes, entry_json, NewEvent, StoredEvent};
pub use retention::Purged;
pub use store::EventStore;
pub use table_sizes::TableSize;
pub use timers::{ClaimedTimer, NewTimer, TimerKind, TIMERS_CHANNEL};
