//! `destroy_hosted_cluster` `{"cluster"}`: find the live cluster in the registry, run
//! what its create registered and has not undone, in dependency order (NodePools,
//! HostedCluster (annotated for cloud cleanup first), Secrets and Namespace, PrivateLink
//! (the operators' gone, or our old one deleted) and what the guest left in AWS, DNS
//! zones, IAM,
//! OIDC, network), then look for anything of the infra id still in AWS or the
//! management cluster. Nothing left: the name is released. Something left: the
//! workflow fails naming it, and the name stays taken.

use crate::aws::target::{AwsCalls, AwsTarget, AWS_TARGETS};
use std::cmp::Reverse;

use hcpflow_engine::{Activity, WorkflowContext, WorkflowError};
use serde::{Deserialize, Serialize};

use crate::aws::dns::{Cname, HostedZone};
use crate::aws::guest::DeleteGuestResources;
use crate::aws::iam::{OidcProvider, Role, WorkerProfile};
use crate::aws::network::{
    DhcpOptions, InternetGateway, NatGateway, RouteTable, S3Endpoint, Subnet, Vpc,
};
use crate::aws::observed_privatelink::AwaitPrivateLinkRemoved;
use crate::aws::oidc::OidcDocuments;
use crate::aws::privatelink::{EndpointService, InterfaceEndpoint, LoadBalancer, SecurityGroup};
use crate::aws::sweep::{FindLeftovers, Leftover};
use crate::input::DestroyInput;
use crate::kube::hosted_cluster::HostedCluster;
use crate::kube::leftovers::FindKubeLeftovers;
use crate::kube::namespace::Namespace;
use crate::kube::node_pool::NodePool;
use crate::kube::secrets::Secrets;
use crate::registry::{
    ClusterState, FindCluster, MarkCluster, PendingCompensation, RegisteredCluster,
};
use crate::Delete;

pub const TYPE: &str = "destroy_hosted_cluster";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DestroyOutput {
    pub cluster: String,
    pub infra_id: String,
    /// The compensations run, in order.
    pub undone: Vec<String>,
    /// Anything of the infra id still found (empty, or the workflow failed).
    pub leftovers: Vec<Leftover>,
}

/// The destroy phases, first to last; within a phase the newest registration goes
/// first. A type not listed runs after every phase.
const PHASES: [&[&str]; 8] = [
    &[<Delete<NodePool> as Activity>::TYPE],
    &[<Delete<HostedCluster> as Activity>::TYPE],
    &[
        <Delete<Secrets> as Activity>::TYPE,
        <Delete<Namespace> as Activity>::TYPE,
    ],
    &[
        <AwaitPrivateLinkRemoved as Activity>::TYPE,
        <DeleteGuestResources as Activity>::TYPE,
        <Delete<Cname> as Activity>::TYPE,
        <Delete<InterfaceEndpoint> as Activity>::TYPE,
        <Delete<SecurityGroup> as Activity>::TYPE,
        <Delete<EndpointService> as Activity>::TYPE,
        <Delete<LoadBalancer> as Activity>::TYPE,
    ],
    &[<Delete<HostedZone> as Activity>::TYPE],
    &[
        <Delete<Role> as Activity>::TYPE,
        <Delete<WorkerProfile> as Activity>::TYPE,
    ],
    &[
        <Delete<OidcDocuments> as Activity>::TYPE,
        <Delete<OidcProvider> as Activity>::TYPE,
    ],
    &[
        <Delete<S3Endpoint> as Activity>::TYPE,
        <Delete<RouteTable> as Activity>::TYPE,
        <Delete<NatGateway> as Activity>::TYPE,
        <Delete<Subnet> as Activity>::TYPE,
        <Delete<InternetGateway> as Activity>::TYPE,
        <Delete<DhcpOptions> as Activity>::TYPE,
        <Delete<Vpc> as Activity>::TYPE,
    ],
];

fn phase(activity_type: &str) -> usize {
    PHASES
        .iter()
        .position(|types| types.contains(&activity_type))
        .unwrap_or(PHASES.len())
}

/// The order a destroy runs `pending` in: by phase, newest registration first within
/// a phase. The name's release is not among them: it follows a clean sweep.
pub fn destroy_order(pending: &[PendingCompensation]) -> Vec<PendingCompensation> {
    let release = <Delete<RegisteredCluster> as Activity>::TYPE;
    let mut ordered: Vec<PendingCompensation> = pending
        .iter()
        .filter(|c| c.activity_type != release)
        .cloned()
        .collect();
    ordered.sort_by_key(|c| (phase(&c.activity_type), Reverse(c.registered_seq)));
    ordered
}

pub async fn destroy_hosted_cluster(
    ctx: WorkflowContext,
    input: DestroyInput,
) -> Result<DestroyOutput, WorkflowError> {
    let live = ctx
        .activity(FindCluster {
            name: input.cluster.clone(),
        })
        .await?;
    let cluster = live.cluster.clone();
    ctx.activity(MarkCluster {
        create_workflow_id: cluster.create_workflow_id.clone(),
        state: ClusterState::Destroying,
    })
    .await?;
    let mut undone = Vec::new();
    for compensation in destroy_order(&live.compensations) {
        ctx.activity_raw(&compensation.activity_type, compensation.input.clone())
            .with_options(compensation.options.clone())
            .await?;
        undone.push(compensation.activity_type);
    }
    let oidc_bucket = live
        .create_input
        .get("oidc_bucket")
        .and_then(|b| b.as_str())
        .map(str::to_owned);
    // Since the patch the search goes to the cluster's region, where the create's calls
    // went (a create recorded before targets could only be made in the server's own).
    let account = |field: &str| {
        live.create_input
            .get(field)
            .and_then(|a| a.as_str())
            .map(str::to_owned)
    };
    let target = ctx
        .patched(AWS_TARGETS)
        .then(|| live.create_input.get("region").and_then(|r| r.as_str()))
        .flatten()
        .map(|region| AwsTarget {
            region: region.to_owned(),
            account: account("aws_account"),
            management_account: account("management_aws_account"),
        });
    let mut leftovers = AwsCalls::new(&ctx, target)
        .call(FindLeftovers {
            infra_id: cluster.infra_id.clone(),
            oidc_bucket,
        })
        .await?;
    leftovers.extend(
        ctx.activity(FindKubeLeftovers {
            infra_id: cluster.infra_id.clone(),
            namespace: cluster.namespace.clone(),
        })
        .await?,
    );
    if !leftovers.is_empty() {
        ctx.activity(MarkCluster {
            create_workflow_id: cluster.create_workflow_id.clone(),
            state: ClusterState::Failed,
        })
        .await?;
        let list: Vec<String> = leftovers.iter().map(ToString::to_string).collect();
        return Err(WorkflowError::failed(format!(
            "cluster {} ({}): {} resource(s) still exist after the destroy: {}",
            cluster.name,
            cluster.infra_id,
            leftovers.len(),
            list.join(", ")
        )));
    }
    ctx.activity(MarkCluster {
        create_workflow_id: cluster.create_workflow_id.clone(),
        state: ClusterState::Destroyed,
    })
    .await?;
    Ok(DestroyOutput {
        cluster: cluster.name,
        infra_id: cluster.infra_id,
        undone,
        leftovers,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use hcpflow_engine::ActivityOptions;
    use serde_json::json;

    fn pending(seq: u64, activity_type: &str) -> PendingCompensation {
        PendingCompensation {
            registered_seq: seq,
            activity_type: activity_type.into(),
            input: json!({}),
            options: ActivityOptions::default(),
        }
    }

    #[test]
    fn a_destroy_runs_kubernetes_then_privatelink_then_iam_oidc_and_network_last() {
        let registered = [
            pending(3, "registry.release_cluster"),
            pending(5, "aws.delete_vpc"),
            pending(6, "aws.delete_subnet"),
            pending(7, "aws.delete_subnet"),
            pending(9, "aws.delete_zone"),
            pending(11, "aws.delete_oidc_provider"),
            pending(12, "aws.delete_role"),
            pending(14, "aws.delete_load_balancer"),
            pending(15, "aws.delete_cname"),
            pending(17, "kube.delete_namespace"),
            pending(18, "kube.delete_secrets"),
            pending(19, "kube.delete_hosted_cluster"),
            pending(21, "kube.delete_node_pool"),
        ];
        let order: Vec<(u64, String)> = destroy_order(&registered)
            .into_iter()
            .map(|c| (c.registered_seq, c.activity_type))
            .collect();
        let seqs: Vec<u64> = order.iter().map(|(seq, _)| *seq).collect();
        assert_eq!(seqs, vec![21, 19, 18, 17, 15, 14, 9, 12, 11, 7, 6, 5]);
        assert!(order.iter().all(|(_, t)| t != "registry.release_cluster"));
    }
}
