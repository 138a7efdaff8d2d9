//! hcpflow's workers and the `hcpflow` command: the engine run for real, with history in
//! Postgres and work carried by NATS JetStream.
//!
//! Where to start reading, one folder a role:
//! - [`roles`]: the workers, the timer service, the relay, the sweeper and the
//!   checkpointer, and [`roles::server`], which runs them;
//! - [`runtime`]: what they stand on — the journal (append, then dispatch), one step
//!   in one transaction, the history cache, eager dispatch, NATS deliveries;
//! - [`api`]: the public NATS API, server side (router, intake, submit);
//! - [`catalog`]: what this server runs — workflow types and activities by type name;
//! - [`cli`]: the `hcpflow` command, its configuration and the commands that are API
//!   clients (`cluster`, `workflow`, `audit`, `bench`).
//!
//! The NATS protocol (subjects, message bodies, the API client; a public contract) is
//! the crate `hcpflow-protocol`; the offline audit (export format, evidence, replay) is
//! the crate `hcpflow-audit`.

// `hcpflow config` prints every setting in one `json!` literal, deeper than the default limit.
#![recursion_limit = "256"]

pub mod api;
pub mod catalog;
pub mod cli;
pub mod roles;
pub mod runtime;
