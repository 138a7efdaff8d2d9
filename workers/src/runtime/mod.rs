//! The runtime every role stands on: appending to a history ([`journal`]), what a step
//! decides ([`decide`], pure), the messages an append causes ([`outgoing`], pure),
//! publishing them after the commit ([`publish`]; events in batches, [`event_batches`]), one step of a workflow in one
//! transaction ([`step`]), the decoded histories a process keeps ([`history_cache`]),
//! running an activity here at once when this process can ([`eager`]), NATS streams,
//! consumers and deliveries ([`nats`]), what a failed task's message becomes
//! ([`task_error`]: ack, retry later or block), the seal keys' start-up check
//! ([`seal_key_check`]) and their reload when their files change ([`key_reload`]),
//! metrics and the operators' HTTP endpoint ([`ops_http`]: metrics, liveness, readiness),
//! and the TLS provider.
//!
//! What it guarantees: every append commits its outgoing messages with it (the outbox)
//! and publishes them after the commit; a conflicting append is detected, never
//! overwritten; nothing here decides what a workflow does — the engine does.

pub mod dead_letter;
pub mod decide;
pub mod eager;
pub mod event_batches;
pub mod history_cache;
pub mod journal;
pub mod key_reload;
pub mod metrics;
pub mod nats;
pub mod ops_http;
pub mod outgoing;
pub mod publish;
pub mod seal_key_check;
pub mod step;
pub mod step_gate;
pub mod task_error;
pub mod tls;
pub mod witnessed;
