//! Idempotent Kubernetes activities: server-side apply of the control-plane objects,
//! waits on HostedCluster and NodePool conditions, scale, and deletes.
//!
//! Status: empty. The activities arrive with the "Kubernetes side" issue; nothing here
//! talks to Kubernetes yet.
