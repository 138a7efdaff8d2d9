//! hcpflow's workers and the `hcpflow` command.
//!
//! Status: only `hcpflow migrate` exists. NATS dispatch, the workflow and activity
//! workers, the outbox relay, the timer service and `hcpflow server` arrive with the
//! "Dispatch over NATS JetStream" issue.
//!
//! - [`cli`]: the command line, with its layered configuration.

pub mod cli;
