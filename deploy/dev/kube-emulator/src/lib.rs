//! A Kubernetes API emulator for hcpflow's local stack, with a simulated HyperShift
//! operator. No kube-apiserver can be installed on our machines; this serves the subset
//! kube-rs and kubectl need (see the crate README in ARCHITECTURE.md): discovery,
//! Namespaces, Secrets, ConfigMaps, HostedClusters and NodePools, with create, get,
//! list, update, merge and JSON patch, server-side apply, status and scale
//! subresources, finalizers, and watch.
//!
//! Where to start reading: [`store`] (objects and their metadata), [`http`] (routes and
//! handlers), [`admission`] and [`schema`] (what the HyperShift CRDs accept), [`apply`]
//! (field ownership), [`operator`] (the simulated operator).

pub mod admission;
pub mod apply;
pub mod discovery;
pub mod error;
pub mod http;
pub mod operator;
pub mod patch;
pub mod resources;
pub mod schema;
pub mod selectors;
pub mod server;
pub mod store;
