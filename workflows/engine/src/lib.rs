//! The pure durable-execution core of hcpflow.
//!
//! This crate never performs I/O: no database, network, filesystem, clock or randomness.
//! Everything that must be identical in a live run and in a replay lives here.
//!
//! Where to start reading:
//! - [`ids`]: the newtypes every other crate uses to name workflows and history positions;
//! - [`status`]: the workflow lifecycle of DESIGN.md §2;
//! - [`canonical`]: the byte form that is hashed and stored for every event;
//! - [`chain`]: the SHA-256 hash chain that makes a history tamper-evident.
//!
//! The replay executor, `WorkflowContext` and the event enum arrive with the
//! "durable execution core" issue; they build on these pieces.

pub mod canonical;
pub mod chain;
pub mod ids;
pub mod status;

pub use chain::ChainHash;
pub use ids::{IdError, Seq, WorkflowId};
pub use status::WorkflowStatus;
