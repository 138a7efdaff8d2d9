//! Integration tests of the Kubernetes activities, against the project's Kubernetes API
//! emulator started in this process (fast operator timings): kube-rs against every API
//! behaviour the activities rely on, and each activity run twice, failed on purpose and
//! undone.

#![allow(clippy::unwrap_used)]

mod activities;
mod api;
mod support;
