//! Idempotent Kubernetes activities: server-side apply of the control-plane objects,
//! the HostedCluster's create-or-adopt, waits on HostedCluster and NodePool conditions,
//! NodePool scaling, and deletes that wait for finalizers.
//!
//! Where to start reading:
//! - [`client`]: connecting from a URL, a kubeconfig, or in-cluster configuration;
//! - [`resources`]: the API resources served (explicit — nothing is discovered at run
//!   time), the field manager, and the ledger entries of an object;
//! - [`error`]: Kubernetes errors classified once into retryable and permanent failures;
//! - [`manifest`]: the HostedCluster and NodePool documents, built from a request;
//! - [`namespace`], [`secrets`], [`hosted_cluster`], [`node_pool`]: the activities;
//!   [`secret_refs`]: pull secrets read from where a reference says, for a tenant
//!   granted it;
//!   [`private_platform`]: whether the operator is installed for private clusters;
//!   [`signing_key`]: the service-account key in the PKCS#1 form the operator parses;
//! - [`wait`], [`delete`]: polling for a condition, and delete-until-gone;
//! - [`leftovers`]: what the cluster still holds of an infra id (destroy's last check);
//! - [`dispatch`]: every activity by its type name.
//!
//! Every activity may run more than once (at-least-once execution); each is written so
//! that a second run has the effect of one.

pub mod client;
pub mod delete;
pub mod dispatch;
pub mod error;
pub mod hosted_cluster;
pub mod leftovers;
pub mod manifest;
pub mod namespace;
pub mod node_pool;
pub mod private_platform;
pub mod resources;
pub mod secret_refs;
pub mod secrets;
pub mod signing_key;
pub mod wait;

pub use client::{ConnectError, KubeSettings};
pub use dispatch::{KubeActivities, Timing};
