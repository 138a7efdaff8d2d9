//! hcpflow's offline audit, pure: a history in, findings out. No database, no NATS, no
//! cloud SDK — what an auditor (or `replay-tests`) needs to check a workflow's record
//! without running the system.
//!
//! - [`file`]: the export format, a self-contained JSON-lines file checked line by line;
//! - [`evidence`]: judging the chain and its signed checkpoints against the audit key;
//! - [`replay`]: does today's workflow code make exactly the recorded decisions, what
//!   the history did to the cloud, and what a destroy would still run;
//! - [`step_label`]: how a step is named in all of these.

pub mod evidence;
pub mod file;
pub mod replay;
mod step_label;

pub use step_label::step_label;
