//! The roles a process runs, each taking its work from NATS (or Postgres) and giving it
//! back on shutdown: the [`workflow_worker`], the [`activity_worker`], the
//! [`timer_service`], the outbox [`relay`], the [`sweeper`] (Postgres is the truth) and
//! the [`checkpointer`] (signed heads). [`server`] starts them, together or alone.
//!
//! What they guarantee: a task is acked only after its outcome is committed; a task
//! lost in NATS is found again by the sweeper; a shutdown finishes what is in flight.

pub mod activity_worker;
pub mod checkpointer;
pub mod relay;
pub mod server;
pub mod sweeper;
pub mod timer_service;
pub mod workflow_worker;
