//! Event store tests against the dev stack's real Postgres (`make test` starts it).
//!
//! Tests share one database: each uses its own workflow ids, never a global reset, so
//! they run in parallel.

// Helpers outside #[test] functions unwrap too: a failed step is a failed test.
#![allow(clippy::unwrap_used)]

mod append_only;
mod appends;
mod attempt_claims;
mod claims;
mod concurrency;
mod group;
mod known_and_published;
mod large_history;
mod log_statistics;
mod notify;
mod registry;
mod row_checks;
mod support;
mod tamper;
mod tls;
mod unix_socket;
