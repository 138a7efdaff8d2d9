//! The pure durable-execution core of hcpflow.
//!
//! Workflow code is plain async Rust, replayed deterministically from its history. This
//! crate never performs I/O: no database, network, filesystem or wall clock; randomness
//! only through [`Entropy`], recorded. Everything that must be identical in a live run
//! and in a replay lives here.
//!
//! Where to start reading:
//! - [`WorkflowContext`] (`context.rs`): what workflow code can do;
//! - [`run_workflow_task`] (`executor.rs`): history in, new commands out;
//! - [`event`]: the versioned event kinds, one struct each;
//! - `saga.rs`: compensations on failure and cancel;
//! - [`history`]: questions workers ask of a history (pending work, duplicates,
//!   compensations for destroy);
//! - [`canonical`] and [`chain`]: the bytes that are hashed, and the hash chain;
//!   [`checkpoint`]: signed heads;
//! - [`sealed`]: secrets as AEAD ciphertext;
//! - [`catalog`]: workflow types with what intake knows of each (validation, sealed
//!   fields, concurrency key);
//! - `testing` (feature `test-util`): an in-process driver with fake activities.

pub mod canonical;
pub mod catalog;
pub mod chain;
pub mod checkpoint;
mod context;
pub mod entropy;
mod error;
pub mod event;
mod executor;
pub mod history;
pub mod idempotency;
pub mod ids;
mod ledger;
pub mod lower_hex;
mod registry;
mod retry;
mod saga;
pub mod seal_keys;
pub mod sealed;
mod state;
pub mod status;
mod time;

#[cfg(any(test, feature = "test-util"))]
pub mod testing;

pub use catalog::{Catalog, TypeInfo};
pub use chain::ChainHash;
pub use checkpoint::{AuditPublicKey, AuditSigningKey, Checkpoint, CheckpointError};
pub use context::{
    child_id, Activity, ActivityCall, Cancelled, ChildCall, JoinAll, SignalWait, Sleep,
    WorkflowContext,
};
pub use entropy::{Entropy, OsEntropy, SeededEntropy};
pub use error::{scrub_quoted, ActivityFailure, ErrorClass, ExecError, WorkflowError};
pub use event::{Event, EventError, HistoryEvent};
pub use executor::{run_workflow_task, TaskOutcome};
pub use idempotency::IdempotencyKey;
pub use ids::{IdError, Seq, TenantId, WorkflowId};
pub use ledger::{Ledger, Noted};
pub use registry::{DuplicateWorkflowType, WorkflowRegistry};
pub use retry::{ActivityOptions, RetryDecision, RetryPolicy};
pub use seal_keys::SealKeys;
pub use sealed::{input_purpose, Binding, Keyring, SealError, Sealed};
pub use status::WorkflowStatus;
pub use time::Timestamp;
