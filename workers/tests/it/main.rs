//! Workers tests against the dev stack's real Postgres and NATS, with real `hcpflow`
//! processes (started, killed with SIGKILL, restarted). Each test uses its own subject
//! prefix — its own streams and consumers — and its own workflow ids.

#![allow(clippy::unwrap_used)]

mod api;
mod audit;
mod auth;
mod aws_registry;
mod cluster_commands;
mod cluster_crash;
mod cluster_support;
mod config;
mod crash;
mod hosted_cluster;
mod hostile;
mod kube_registry;
mod rollback;
mod secrets;
mod submit;
mod support;
mod terminal_errors;
mod workflow_commands;
