//! What happens in AWS when a HostedCluster is deleted, before its finalizer goes: the
//! HostedCluster controller deletes the AWSEndpointServices and waits for them
//! (hostedcluster_controller.go: `delete`, `deleteAWSEndpointServices`); the
//! control-plane-operator removes its records, endpoints and endpoint security groups
//! (awsprivatelink_controller.go: `delete`, `deleteSecurityGroup`), the
//! hypershift-operator the endpoint services (platform/aws/controller.go: `delete`),
//! the management cluster's cloud provider the load balancers of the deleted Services.
//! All of that happens on every deletion.
//!
//! Then the control plane's own deletion (hostedcontrolplane_controller.go:
//! `reconcileDeletion`), only when `shouldCleanupCloudResources`: the HostedCluster
//! carries `hypershift.openshift.io/cleanup-cloud-resources: "true"` (the
//! HostedCluster controller copies it to the HostedControlPlane; `hypershift destroy
//! cluster` sets it) and the CPO's credentials are valid (`hasValidCloudCredentials`:
//! here, its role can be assumed, `ValidAWSIdentityProvider` not False; the real one
//! also skips while that condition is Unknown, which the emulator does not). Then, in
//! that order:
//!
//! - `destroyAWSDefaultSecurityGroup`, reported as `AWSDefaultSecurityGroupDeleted`:
//!   True `AsExpected` "All is well"; or False `AWSError` "failed to delete AWS default
//!   security group" (a DependencyViolation: the error itself). UnauthorizedOperation,
//!   InvalidIdentityToken (and the emulator's WebIdentityErr) and DependencyViolation
//!   are logged and skipped; any other failure keeps the HostedCluster and is retried;
//! - `removeCloudResources`: the hosted cluster config operator has the guest's
//!   components remove their cloud resources (`guest`; resources.go:
//!   `destroyCloudResources`), reported as `CloudResourcesDestroyed`: False
//!   `RemainingCloudResources` "Remaining resources: image-registry,…" while any is
//!   left, True `CloudResourcesDestroyed` "All guest resources destroyed" once none is;
//!   False `CloudResourcesCleanupSkipped` "Cleanup skipped: KubeAPIServerUnavailable"
//!   when the guest's API server never came up (`ShouldSkipCleanup`; the emulator
//!   reads the HostedCluster's `KubeAPIServerAvailable`); and after the grace period
//!   without success (`resourceDeletionTimeout`, 10 minutes in the real control plane;
//!   the emulator's is [`super::Settings::guest_cleanup_timeout`]) False
//!   `CloudResourcesDeletionTimedOut` "Giving up on cloud resource deletion after <d>
//!   (last status: <message>)", and the deletion goes on.
//!
//! Without the annotation (or without valid credentials) the control plane touches
//! neither: the default security group and the guest's load balancers, volume, bucket
//! and record stay in AWS (`hypershift destroy infra` removes them by tag afterwards),
//! and the HostedCluster controller, bubbling the conditions up from a control plane
//! being deleted that has none, reports both Unknown `StatusUnknown`
//! (`computeAWSDefaultSGDeletedCondition` and the `CloudResourcesDestroyed` bubble-up).
//! A HostedCluster that never had a control plane gets neither condition.
//!
//! Everything is found by name or tag, so it also works after a restart and when
//! nothing was ever made (what is not found is done). A failure stops the pass and
//! keeps the finalizer; the next pass tries again. As in the real operators: a
//! control-plane-operator without credentials (its role cannot be assumed) cleans up
//! nothing of its own (the hypershift-operator then releases the endpoint services,
//! `deleteAWSEndpointServices`); one that keeps failing is given up on after the
//! hypershift-operator's grace period (`awsEndpointDeletionGracePeriod`, 10 minutes).

use std::time::{Duration, Instant};

use super::aws::Clients;
use super::conditions::{
    condition, not_reported, ALL_IS_WELL, CLOUD_RESOURCES_DESTROYED, SECURITY_GROUP_DELETED,
};
use super::default_security_group;
use super::endpoint;
use super::endpoint_service;
use super::guest;
use super::iam::Cpo;
use super::load_balancer;
use super::spec::{all_private_services, Cluster};

/// `awsEndpointDeletionGracePeriod`.
const GRACE: Duration = Duration::from_secs(600);

/// Where a deletion stands after one pass.
#[derive(Debug, Default)]
pub(super) struct Progress {
    /// Everything is gone: the finalizer may go.
    pub(super) done: bool,
    /// What stops it, when it is not done.
    pub(super) problem: Option<String>,
    /// `AWSDefaultSecurityGroupDeleted` and `CloudResourcesDestroyed`, once the control
    /// plane's deletion ran.
    pub(super) conditions: Vec<serde_json::Value>,
}

fn stopped(problem: String) -> Progress {
    Progress {
        done: false,
        problem: Some(problem),
        conditions: Vec::new(),
    }
}

/// The control-plane-operator's part of a private cluster's cleanup.
async fn private_link(clients: &Clients, cpo: &Cpo, cluster: &Cluster) -> Result<(), String> {
    let services = all_private_services();
    endpoint::destroy_records(clients, cpo, cluster, &services).await?;
    for service in &services {
        endpoint::destroy_endpoint(clients, cpo, cluster, service).await?;
    }
    for service in &services {
        if !endpoint::destroy_security_group(clients, cpo, cluster, service).await? {
            return Err(format!(
                "the security group of {} still has dependencies",
                service.name
            ));
        }
    }
    Ok(())
}

/// The guest cleanup's progress, kept between passes.
#[derive(Debug, Default)]
pub(super) struct GuestCleanup {
    /// When the control plane first asked for it (`CVOScaledDown`).
    started: Option<Instant>,
    /// The last `CloudResourcesDestroyed` message.
    last: Option<String>,
}

/// What a deletion pass knows of the deletion.
#[derive(Debug)]
pub(super) struct Deletion<'a> {
    /// When the HostedCluster was first seen deleted.
    pub(super) since: Instant,
    pub(super) guest: &'a mut GuestCleanup,
    /// The control plane's `resourceDeletionTimeout`.
    pub(super) timeout: Duration,
}

/// One pass of the cleanup of a deleted HostedCluster: the control plane's with
/// `clients` (its region and account), the hypershift-operator's endpoint services and
/// the management cluster's load balancers with `management`.
pub(super) async fn run(
    clients: &Clients,
    management: &Clients,
    cpo: &Cpo,
    cluster: &Cluster,
    deletion: Deletion<'_>,
) -> Progress {
    if !cluster.aws {
        return Progress {
            done: true,
            ..Progress::default()
        };
    }
    if cluster.private() {
        if cpo.cannot_assume() {
            tracing::info!(cluster = %cluster.name,
                           "the control-plane-operator has no credentials: its endpoints, security groups and records are left");
        } else if let Err(problem) = private_link(clients, cpo, cluster).await {
            if deletion.since.elapsed() < GRACE {
                return stopped(problem);
            }
            tracing::warn!(cluster = %cluster.name, %problem,
                           "giving up on the control-plane-operator's cleanup after the grace period");
        }
        for service in all_private_services() {
            if let Err(problem) = endpoint_service::destroy(management, cluster, &service).await {
                return stopped(problem);
            }
        }
        for service in all_private_services() {
            if let Err(problem) = load_balancer::destroy(management, cluster, &service).await {
                return stopped(problem.go_error());
            }
        }
    }
    if !cluster.has_control_plane() {
        return Progress {
            done: true,
            ..Progress::default()
        };
    }
    if !cluster.cleanup_cloud_resources || cpo.cannot_assume() {
        if cluster.cleanup_cloud_resources {
            tracing::info!(cluster = %cluster.name, reason = "Invalid AWS identity provider",
                           "Skipping hosted cluster cloud resources cleanup");
        } else {
            tracing::info!(cluster = %cluster.name,
                           "no cleanup-cloud-resources annotation: the default security group and the guest's cloud resources are left");
        }
        return Progress {
            done: true,
            problem: None,
            conditions: vec![
                not_reported(SECURITY_GROUP_DELETED, cluster.generation),
                not_reported(CLOUD_RESOURCES_DESTROYED, cluster.generation),
            ],
        };
    }
    let mut conditions = Vec::new();
    match default_security_group::destroy(clients, cpo, cluster).await {
        Ok(()) => conditions.push(condition(
            SECURITY_GROUP_DELETED,
            "True",
            "AsExpected",
            ALL_IS_WELL,
            cluster.generation,
        )),
        Err(failure) => {
            let message = if failure.code == "DependencyViolation" {
                failure.message.clone()
            } else {
                "failed to delete AWS default security group".to_owned()
            };
            conditions.push(condition(
                SECURITY_GROUP_DELETED,
                "False",
                "AWSError",
                &message,
                cluster.generation,
            ));
            let skipped = matches!(
                failure.code.as_str(),
                "UnauthorizedOperation"
                    | "InvalidIdentityToken"
                    | "WebIdentityErr"
                    | "DependencyViolation"
            );
            if !skipped {
                return Progress {
                    done: false,
                    problem: Some(failure.message),
                    conditions,
                };
            }
            tracing::warn!(cluster = %cluster.name, code = %failure.code, message = %failure.message,
                           "skipping AWS default security group deletion");
        }
    }
    let (destroyed, done) = guest_cleanup(clients, cluster, deletion.guest, deletion.timeout).await;
    let problem = (!done).then(|| destroyed["message"].as_str().unwrap_or_default().to_owned());
    conditions.push(destroyed);
    Progress {
        done,
        problem,
        conditions,
    }
}

/// `removeCloudResources` with the HCCO's `destroyCloudResources`: the
/// `CloudResourcesDestroyed` condition, and whether the control plane is through with it.
async fn guest_cleanup(
    clients: &Clients,
    cluster: &Cluster,
    state: &mut GuestCleanup,
    timeout: Duration,
) -> (serde_json::Value, bool) {
    let generation = cluster.generation;
    let started = *state.started.get_or_insert_with(Instant::now);
    let elapsed = started.elapsed();
    if let Some(last) = &state.last {
        if elapsed > timeout {
            let message = format!(
                "Giving up on cloud resource deletion after {} (last status: {last})",
                short_human_duration(elapsed)
            );
            tracing::warn!(cluster = %cluster.name, %message, "giving up on the guest's cloud resources");
            let given_up = condition(
                CLOUD_RESOURCES_DESTROYED,
                "False",
                "CloudResourcesDeletionTimedOut",
                &message,
                generation,
            );
            return (given_up, true);
        }
    }
    // `cleanup_tracker.go` `ShouldSkipCleanup`: no kube-apiserver, or (the HCCO's
    // `resources.go`) too many failures to reach the guest.
    let skipped_because = if !cluster.is("KubeAPIServerAvailable", "True") {
        Some("KubeAPIServerUnavailable")
    } else if cluster.guest_unreachable {
        Some("MaxConnectionFailuresExceeded")
    } else {
        None
    };
    if let Some(why) = skipped_because {
        let skipped = condition(
            CLOUD_RESOURCES_DESTROYED,
            "False",
            "CloudResourcesCleanupSkipped",
            &format!("Cleanup skipped: {why}"),
            generation,
        );
        return (skipped, true);
    }
    let remaining = guest::destroy(clients, cluster).await;
    if remaining.is_empty() {
        tracing::info!(cluster = %cluster.name, "the guest's cloud resources are gone");
        let destroyed = condition(
            CLOUD_RESOURCES_DESTROYED,
            "True",
            "CloudResourcesDestroyed",
            "All guest resources destroyed",
            generation,
        );
        return (destroyed, true);
    }
    let message = format!("Remaining resources: {}", remaining.join(","));
    state.last = Some(message.clone());
    let remains = condition(
        CLOUD_RESOURCES_DESTROYED,
        "False",
        "RemainingCloudResources",
        &message,
        generation,
    );
    (remains, false)
}

/// k8s.io/apimachinery `duration.ShortHumanDuration`.
fn short_human_duration(d: Duration) -> String {
    let seconds = d.as_secs();
    if seconds < 60 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 60 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 24 {
        return format!("{hours}h");
    }
    if hours < 24 * 365 {
        return format!("{}d", hours / 24);
    }
    format!("{}y", hours / 24 / 365)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operator::cloud::Settings;
    use serde_json::json;

    fn cluster(api_up: bool) -> Cluster {
        let status = if api_up { "True" } else { "False" };
        Cluster::read(
            &json!({"metadata": {"name": "c", "namespace": "n", "uid": "u", "generation": 2},
                    "status": {"conditions": [{"type": "KubeAPIServerAvailable", "status": status}]}}),
            &[],
        )
    }

    /// Clients to nowhere: the paths tested make no call.
    async fn clients() -> Clients {
        Clients::connect(&Settings {
            endpoint: "http://127.0.0.1:9".into(),
            region: "us-east-1".into(),
            management_cluster: "m".into(),
            period: Duration::from_millis(100),
            guest_cleanup_timeout: Duration::from_secs(10),
        })
        .await
    }

    #[tokio::test]
    async fn the_control_plane_gives_up_after_the_timeout_with_the_last_status() {
        let mut state = GuestCleanup {
            started: Instant::now().checked_sub(Duration::from_secs(20)),
            last: Some("Remaining resources: image-registry".into()),
        };
        let (condition, done) = guest_cleanup(
            &clients().await,
            &cluster(true),
            &mut state,
            Duration::from_secs(10),
        )
        .await;
        assert!(done);
        assert_eq!(
            (
                &condition["type"],
                &condition["status"],
                &condition["reason"]
            ),
            (
                &json!("CloudResourcesDestroyed"),
                &json!("False"),
                &json!("CloudResourcesDeletionTimedOut")
            )
        );
        assert_eq!(
            condition["message"],
            "Giving up on cloud resource deletion after 20s (last status: Remaining resources: image-registry)"
        );
        assert_eq!(condition["observedGeneration"], 2);
    }

    #[tokio::test]
    async fn without_the_guests_api_server_the_cleanup_is_skipped() {
        let (condition, done) = guest_cleanup(
            &clients().await,
            &cluster(false),
            &mut GuestCleanup::default(),
            Duration::from_secs(10),
        )
        .await;
        assert!(done);
        assert_eq!(
            (
                &condition["status"],
                &condition["reason"],
                &condition["message"]
            ),
            (
                &json!("False"),
                &json!("CloudResourcesCleanupSkipped"),
                &json!("Cleanup skipped: KubeAPIServerUnavailable")
            )
        );
    }

    #[test]
    fn durations_are_written_like_kubernetes_short_ones() {
        assert_eq!(short_human_duration(Duration::from_millis(10_400)), "10s");
        assert_eq!(short_human_duration(Duration::from_secs(600)), "10m");
        assert_eq!(short_human_duration(Duration::from_secs(7_200)), "2h");
        assert_eq!(short_human_duration(Duration::from_secs(3 * 86_400)), "3d");
    }
}
