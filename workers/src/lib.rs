//! hcpflow's workers and the `hcpflow` command: the engine run for real, with history in
//! Postgres and work carried by NATS JetStream.
//!
//! Where to start reading:
//! - [`server`]: the roles and how a process runs them;
//! - [`journal`]: appending to a history and dispatching what the append caused;
//! - [`workflow_worker`], [`activity_worker`], [`timer_service`], [`relay`],
//!   [`sweeper`], [`checkpointer`]: the roles;
//! - [`api`], [`submit`], [`intake`]: the public NATS API (DESIGN.md §4);
//! - [`builtin`]: `noop_chain` and `noop_fanout` (the HyperShift workflows are
//!   registered by `hcpflow_hypershift::catalog`); [`aws_activities`], [`kube_activities`] and [`registry_activities`]:
//!   the activities they call, registered by type name;
//! - [`config`], [`cli`]: configuration and the command line; [`cluster_cli`] (with
//!   [`cluster_spec`], [`api_client`], [`follow`] and [`progress`]), [`workflow_cli`] and [`audit_cli`]:
//!   `hcpflow cluster`, `hcpflow workflow` and `hcpflow audit`,
//!   clients of the NATS API (the first two with live progress).

pub mod activities;
pub mod activity_worker;
pub mod api;
pub mod api_client;
pub mod audit_cli;
pub mod aws_activities;
pub mod bench;
pub mod builtin;
pub mod checkpointer;
pub mod cli;
pub mod cluster_cli;
pub mod cluster_spec;
pub mod config;
pub mod eager;
pub mod follow;
pub mod history_cache;
pub mod intake;
pub mod journal;
pub mod kube_activities;
pub mod metrics;
pub mod migrate;
pub mod nats;
pub mod progress;
pub mod registry_activities;
pub mod relay;
pub mod server;
pub mod step;
pub mod subjects;
pub mod submit;
pub mod sweeper;
pub mod timeline;
pub mod timer_service;
pub mod tls;
pub mod wire;
pub mod workflow_cli;
pub mod workflow_worker;
