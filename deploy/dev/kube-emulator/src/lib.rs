//! A Kubernetes API emulator for hcpflow's local stack, with a simulated HyperShift
//! operator. No kube-apiserver can be installed on our machines; this serves the subset
//! kube-rs and kubectl need (see the crate README in ARCHITECTURE.md): discovery,
//! Namespaces, Secrets, ConfigMaps, Deployments, HostedClusters and NodePools, with
//! create, get, list, update, merge and JSON patch, server-side apply, status and scale
//! subresources, finalizers, and watch. Given an AWS endpoint (moto), the simulated
//! operators also make in AWS what the real ones make for a HostedCluster — its default
//! security group and PrivateLink — and remove it on deletion
//! ([`operator::cloud`]).
//!
//! Where to start reading: [`store`] (objects and their metadata), [`http`] (routes and
//! handlers), [`admission`] and [`schema`] (what the HyperShift CRDs accept), [`apply`]
//! (field ownership), [`operator`] (the simulated operator), [`server`] (how it is
//! started and installed).

pub mod admission;
pub mod apply;
pub mod discovery;
pub mod error;
pub mod http;
pub mod operator;
pub mod patch;
pub mod request_log;
pub mod resources;
pub mod schema;
pub mod selectors;
pub mod server;
pub mod store;
