//! Workers tests against the dev stack's real Postgres and NATS, with real `hcpflow`
//! processes (started, killed with SIGKILL, restarted). Each test uses its own subject
//! prefix — its own streams and consumers — and its own workflow ids.

#![allow(clippy::unwrap_used)]

mod accounts;
mod api;
mod audit;
mod auth;
mod aws_registry;
mod backlog;
mod children;
mod cluster_commands;
mod cluster_crash;
mod cluster_support;
mod config;
mod cpu_work;
mod crash;
mod deployment;
mod events_stream;
mod histories;
mod hosted_cluster;
mod iam_policy;
mod image;
mod kube_registry;
mod limits;
mod nats_cluster;
mod overload;
mod permissions;
mod pg_failover;
mod probes;
mod rbac;
mod regions;
mod rollback;
mod rotation;
mod scale_out;
mod secrets;
mod storm;
mod submit;
mod support;
mod tasks;
mod tenants;
mod terminal_errors;
mod workflow_commands;
