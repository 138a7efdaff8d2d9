//! `create_hosted_cluster` (DESIGN.md §5): validate, register the name, check the
//! prerequisites, then network → OIDC → IAM → PrivateLink (unless Public) → control
//! plane → NodePools. Every create registers its compensation as soon as it has
//! succeeded, so a failure after retries rolls back exactly what exists, newest first,
//! and a later destroy can run the same compensations.

use std::collections::BTreeMap;

use hcpflow_engine::{Sealed, WorkflowContext, WorkflowError};
use serde::{Deserialize, Serialize};

use crate::aws::dns::{CreatePrivateZone, FindPublicZone, HostedZone};
use crate::aws::guest::DeleteGuestResources;
use crate::aws::iam::{
    CreateOidcProvider, CreateOperatorRole, CreateWorkerProfile, OidcProvider, Role, WorkerProfile,
    OPERATOR_ROLES,
};
use crate::aws::network::{
    CreateDhcpOptions, CreateInternetGateway, CreateNatGateway, CreateRouteTable, CreateS3Endpoint,
    CreateSubnet, CreateVpc, DefaultRoute, Exposure, NatGateway, Subnet,
};
use crate::aws::oidc::{GenerateSigningKey, OidcDocuments, PublishOidcDocuments, SigningKey};
use crate::aws::prerequisites::CheckPrerequisites;
use crate::aws::target::{AwsCalls, AwsTarget, AWS_TARGETS};
use crate::input::{
    CreateClusterInput, NodePoolSpec, DEFAULT_CONTROL_PLANE_TIMEOUT_SECS,
    DEFAULT_NODE_POOL_TIMEOUT_SECS,
};
use crate::kube::hosted_cluster::{CreateHostedCluster, WaitHostedClusterAvailable};
use crate::kube::namespace::ApplyNamespace;
use crate::kube::node_pool::{ApplyNodePool, ScaleNodePool, WaitNodePoolReady};
use crate::kube::secrets::ApplySecrets;
use crate::privatelink::{self, ObservedPrivateLink, PrivateLink};
use crate::registry::{ClusterState, MarkCluster, RegisterCluster};
use crate::resource_tags::ResourceTags;
use crate::{naming, network_plan, Delete};

pub const TYPE: &str = "create_hosted_cluster";

/// The patch after which a create checks its region is the AWS activities' region (since
/// `AWS_TARGETS` they are the create's own, so the check always holds).
const REGION_CHECKED: &str = "region-checked";

/// The patch after which a create registers the deletion of what the guest leaves.
const GUEST_RESOURCES_DELETED: &str = "guest-resources-deleted";

/// The patch after which the public route table is the VPC's main table.
const PUBLIC_ROUTE_TABLE_MAIN: &str = "public-route-table-main";

pub type Input = CreateClusterInput<Sealed<String>>;

/// What a create made (DESIGN.md §5 step 8).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateOutput {
    pub name: String,
    pub infra_id: String,
    pub namespace: String,
    pub region: String,
    pub endpoint_access: String,
    pub vpc_id: String,
    pub private_subnet_ids: Vec<String>,
    pub public_subnet_ids: Vec<String>,
    pub nat_gateway_ids: Vec<String>,
    pub public_zone_id: String,
    pub private_zone_id: String,
    pub local_zone_id: String,
    pub issuer_url: String,
    pub oidc_provider_arn: String,
    /// The operator roles' ARNs by role suffix.
    pub role_arns: BTreeMap<String, String>,
    pub worker_instance_profile: String,
    /// Built by hcpflow (histories from before the operators owned PrivateLink).
    pub privatelink: Option<PrivateLink>,
    /// Built by the HyperShift operators, observed by the create.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_privatelink: Option<ObservedPrivateLink>,
    pub kubeconfig_secret: String,
    /// NodePool name → ready replicas.
    pub node_pools: BTreeMap<String, i32>,
}

/// The guest network.
#[derive(Debug, Clone)]
pub(crate) struct Network {
    pub(crate) vpc_id: String,
    pub(crate) private_subnets: Vec<Subnet>,
    pub(crate) public_subnets: Vec<Subnet>,
    pub(crate) nat_gateways: Vec<NatGateway>,
    pub(crate) private_zone: HostedZone,
    pub(crate) local_zone: HostedZone,
}

pub async fn create_hosted_cluster(
    ctx: WorkflowContext,
    input: Input,
) -> Result<CreateOutput, WorkflowError> {
    let problems = input.problems(None);
    if !problems.is_empty() {
        return Err(WorkflowError::invalid_input(problems.join("; ")));
    }
    ctx.keep_on_failure(input.keep_on_failure);
    let create_workflow_id = ctx.workflow_id().to_string();
    let infra_id = input.infra_id_for(&create_workflow_id);
    let registered = ctx
        .activity(RegisterCluster {
            name: input.name.clone(),
            infra_id: infra_id.clone(),
            namespace: input.namespace.clone(),
            create_workflow_id: create_workflow_id.clone(),
        })
        .await?;
    ctx.on_rollback(Delete(registered));
    let outcome = build(&ctx, &input, &infra_id).await;
    if outcome.is_err() && input.keep_on_failure {
        // Kept on failure: the name stays taken until a destroy removes what is left.
        ctx.activity(MarkCluster {
            create_workflow_id,
            state: ClusterState::Failed,
        })
        .await?;
    }
    outcome
}

async fn build(
    ctx: &WorkflowContext,
    input: &Input,
    infra_id: &str,
) -> Result<CreateOutput, WorkflowError> {
    // Since the patch every AWS call, and its compensation, names the create's region.
    let target = ctx.patched(AWS_TARGETS).then(|| AwsTarget {
        region: input.region.clone(),
        account: input.aws_account.clone(),
        management_account: input.management_aws_account.clone(),
    });
    let aws = AwsCalls::new(ctx, target);
    let public_zone = aws
        .call(FindPublicZone {
            base_domain: input.base_domain.clone(),
        })
        .await?;
    // Creates from before the region check replay without it.
    let region = ctx.patched(REGION_CHECKED).then(|| input.region.clone());
    let prerequisites = aws
        .call(CheckPrerequisites {
            region,
            oidc_bucket: input.oidc_bucket.clone(),
            management_vpc_id: (!input.is_public())
                .then(|| input.management.as_ref().map(|m| m.vpc_id.clone()))
                .flatten(),
            management_subnet_ids: if input.is_public() {
                Vec::new()
            } else {
                input
                    .management
                    .as_ref()
                    .map(|m| m.subnet_ids.clone())
                    .unwrap_or_default()
            },
        })
        .await?;

    // PrivateLink: the operators build it since the patch; before, we built our own.
    let management = input.management.as_ref().filter(|_| !input.is_public());
    // Since the patch its checks refuse a create before anything is made.
    let mut checked_first = match management {
        Some(management) if ctx.patched(privatelink::CHECKED_FIRST) => {
            Some(privatelink::check_coverage(ctx, &aws, input, management).await?)
        }
        _ => None,
    };

    let network = network(ctx, &aws, input, infra_id).await?;
    let (signing_key, documents, provider) =
        oidc(&aws, input, infra_id, &prerequisites.oidc_bucket_region).await?;
    let (roles, worker) = iam(
        ctx,
        &aws,
        infra_id,
        &input.resource_tags,
        &provider,
        &public_zone.zone_id,
        &network,
    )
    .await?;
    let role_arn = |suffix: &str| {
        roles
            .iter()
            .find(|(s, _)| s == suffix)
            .map(|(_, role)| role.arn.clone())
            .unwrap_or_default()
    };
    let by_operator = management.is_some() && ctx.patched(privatelink::BY_OPERATOR);
    let mut built = None;
    let mut coverage = None;
    if let Some(management) = management {
        if by_operator {
            coverage = Some(match checked_first.take() {
                Some(checked) => checked,
                None => privatelink::check_coverage(ctx, &aws, input, management).await?,
            });
        } else {
            built = Some(
                privatelink::built_by_hcpflow(
                    ctx,
                    infra_id,
                    input,
                    management,
                    &network,
                    &role_arn("control-plane-operator"),
                )
                .await?,
            );
        }
    }

    // The control plane.
    let namespace = ctx
        .activity(ApplyNamespace {
            infra_id: infra_id.to_owned(),
            namespace: input.namespace.clone(),
        })
        .await?;
    ctx.on_rollback(Delete(namespace));
    let secrets = ctx
        .activity(ApplySecrets {
            infra_id: infra_id.to_owned(),
            cluster: input.name.clone(),
            namespace: input.namespace.clone(),
            pull_secret: input.pull_secret.clone(),
            pull_secret_ref: input.pull_secret_ref.clone(),
            ssh_public_key: input.ssh_public_key.clone(),
            signing_key: signing_key.private_key.clone(),
        })
        .await?;
    ctx.on_rollback(Delete(secrets.clone()));
    // Since the patch: after the HostedCluster's delete, whatever the guest left in AWS
    // is deleted by tag, before the network it sits in.
    if ctx.patched(GUEST_RESOURCES_DELETED) {
        aws.on_rollback(DeleteGuestResources {
            infra_id: infra_id.to_owned(),
            vpc_id: network.vpc_id.clone(),
            public_zone_id: public_zone.zone_id.clone(),
            apps_record: format!(
                "*.apps.{}",
                naming::private_zone(&input.name, &input.base_domain)
            ),
        });
    }
    if by_operator {
        privatelink::expect_removal(&aws, infra_id, input, &network);
    }
    let first = &network.private_subnets[0];
    let hosted_cluster = ctx
        .activity(CreateHostedCluster {
            infra_id: infra_id.to_owned(),
            name: input.name.clone(),
            namespace: input.namespace.clone(),
            release_image: input.release_image.clone(),
            region: input.region.clone(),
            endpoint_access: input.endpoint_access.clone(),
            base_domain: input.base_domain.clone(),
            public_zone_id: public_zone.zone_id.clone(),
            private_zone_id: network.private_zone.zone_id.clone(),
            issuer_url: documents.issuer_url.clone(),
            vpc_id: network.vpc_id.clone(),
            vpc_cidr: input.vpc_cidr.clone(),
            zone: first.zone.clone(),
            subnet_id: first.subnet_id.clone(),
            roles_ref: OPERATOR_ROLES
                .iter()
                .map(|(suffix, field)| ((*field).to_owned(), role_arn(suffix)))
                .collect(),
            secrets,
            resource_tags: input.resource_tags.clone(),
            annotations: input.annotations.clone(),
            availability_policy: input.availability_policy.clone(),
        })
        .await?;
    ctx.on_rollback(Delete(hosted_cluster));
    let available = ctx
        .activity(WaitHostedClusterAvailable {
            namespace: input.namespace.clone(),
            name: input.name.clone(),
            timeout_secs: input
                .control_plane_timeout_secs
                .unwrap_or(DEFAULT_CONTROL_PLANE_TIMEOUT_SECS),
        })
        .await?;

    apply_node_pools(ctx, input, infra_id, &network, &worker).await?;
    let observed_privatelink = match coverage {
        Some(coverage) => {
            Some(privatelink::observe(ctx, &aws, infra_id, input, &network, coverage).await?)
        }
        None => None,
    };
    let node_pools = scale_out_node_pools(ctx, input).await?;
    ctx.activity(MarkCluster {
        create_workflow_id: ctx.workflow_id().to_string(),
        state: ClusterState::Ready,
    })
    .await?;
    Ok(CreateOutput {
        name: input.name.clone(),
        infra_id: infra_id.to_owned(),
        namespace: input.namespace.clone(),
        region: input.region.clone(),
        endpoint_access: input.endpoint_access.clone(),
        vpc_id: network.vpc_id.clone(),
        private_subnet_ids: network
            .private_subnets
            .iter()
            .map(|s| s.subnet_id.clone())
            .collect(),
        public_subnet_ids: network
            .public_subnets
            .iter()
            .map(|s| s.subnet_id.clone())
            .collect(),
        nat_gateway_ids: network
            .nat_gateways
            .iter()
            .map(|n| n.nat_gateway_id.clone())
            .collect(),
        public_zone_id: public_zone.zone_id,
        private_zone_id: network.private_zone.zone_id.clone(),
        local_zone_id: network.local_zone.zone_id.clone(),
        issuer_url: documents.issuer_url,
        oidc_provider_arn: provider.arn,
        role_arns: roles
            .into_iter()
            .map(|(suffix, role)| (suffix, role.arn))
            .collect(),
        worker_instance_profile: worker.instance_profile_name,
        privatelink: built,
        observed_privatelink,
        kubeconfig_secret: available.kubeconfig_secret,
        node_pools,
    })
}

/// One zone's subnets, NAT gateway and private route table.
struct ZoneNetwork {
    private: Subnet,
    public: Subnet,
    nat: NatGateway,
    route_table_id: String,
}

async fn zone_network(
    aws: &AwsCalls,
    infra_id: &str,
    resource_tags: &ResourceTags,
    vpc_id: &str,
    zone: &network_plan::ZoneSubnets,
) -> Result<ZoneNetwork, WorkflowError> {
    let subnet = |exposure, cidr: &str| CreateSubnet {
        infra_id: infra_id.to_owned(),
        vpc_id: vpc_id.to_owned(),
        zone: zone.zone.clone(),
        cidr_block: cidr.to_owned(),
        exposure,
        resource_tags: resource_tags.clone(),
    };
    let private = aws
        .call(subnet(Exposure::Private, &zone.private_cidr))
        .await?;
    aws.on_rollback(Delete(private.clone()));
    let public = aws
        .call(subnet(Exposure::Public, &zone.public_cidr))
        .await?;
    aws.on_rollback(Delete(public.clone()));
    let nat = aws
        .call(CreateNatGateway {
            infra_id: infra_id.to_owned(),
            zone: zone.zone.clone(),
            subnet_id: public.subnet_id.clone(),
            resource_tags: resource_tags.clone(),
        })
        .await?;
    aws.on_rollback(Delete(nat.clone()));
    let table = aws
        .call(CreateRouteTable {
            infra_id: infra_id.to_owned(),
            vpc_id: vpc_id.to_owned(),
            name: naming::private_route_table(infra_id, &zone.zone),
            default_route: DefaultRoute::NatGateway(nat.nat_gateway_id.clone()),
            subnet_ids: vec![private.subnet_id.clone()],
            resource_tags: resource_tags.clone(),
            main: false,
        })
        .await?;
    aws.on_rollback(Delete(table.clone()));
    Ok(ZoneNetwork {
        private,
        public,
        nat,
        route_table_id: table.route_table_id,
    })
}

async fn network(
    ctx: &WorkflowContext,
    aws: &AwsCalls,
    input: &Input,
    infra_id: &str,
) -> Result<Network, WorkflowError> {
    let plan = network_plan::plan(&input.vpc_cidr, &input.zones)
        .map_err(|e| WorkflowError::invalid_input(e.to_string()))?;
    let vpc = aws
        .call(CreateVpc {
            infra_id: infra_id.to_owned(),
            cidr_block: input.vpc_cidr.clone(),
            resource_tags: input.resource_tags.clone(),
        })
        .await?;
    aws.on_rollback(Delete(vpc.clone()));
    let vpc_id = vpc.vpc_id;
    let dhcp = aws
        .call(CreateDhcpOptions {
            infra_id: infra_id.to_owned(),
            vpc_id: vpc_id.clone(),
            resource_tags: input.resource_tags.clone(),
        })
        .await?;
    aws.on_rollback(Delete(dhcp));
    let igw = aws
        .call(CreateInternetGateway {
            infra_id: infra_id.to_owned(),
            vpc_id: vpc_id.clone(),
            resource_tags: input.resource_tags.clone(),
        })
        .await?;
    aws.on_rollback(Delete(igw.clone()));
    // Zones in parallel: each zone's resources depend only on the VPC.
    let zones: Vec<ZoneNetwork> = ctx
        .join_all(
            plan.iter()
                .map(|zone| zone_network(aws, infra_id, &input.resource_tags, &vpc_id, zone)),
        )
        .await
        .into_iter()
        .collect::<Result<_, _>>()?;
    let public_table = aws
        .call(CreateRouteTable {
            infra_id: infra_id.to_owned(),
            vpc_id: vpc_id.clone(),
            name: naming::public_route_table(infra_id),
            default_route: DefaultRoute::InternetGateway(igw.internet_gateway_id.clone()),
            subnet_ids: zones.iter().map(|z| z.public.subnet_id.clone()).collect(),
            resource_tags: input.resource_tags.clone(),
            // Creates from before the patch replay with a public table that is not main.
            main: ctx.patched(PUBLIC_ROUTE_TABLE_MAIN),
        })
        .await?;
    aws.on_rollback(Delete(public_table.clone()));
    // The S3 gateway endpoint routes from every private table and the public one.
    let s3 = aws
        .call(CreateS3Endpoint {
            infra_id: infra_id.to_owned(),
            vpc_id: vpc_id.clone(),
            route_table_ids: zones
                .iter()
                .map(|z| z.route_table_id.clone())
                .chain([public_table.route_table_id.clone()])
                .collect(),
            resource_tags: input.resource_tags.clone(),
        })
        .await?;
    aws.on_rollback(Delete(s3));
    let zone = |name: String| CreatePrivateZone {
        infra_id: infra_id.to_owned(),
        name,
        vpc_id: vpc_id.clone(),
        resource_tags: input.resource_tags.clone(),
    };
    let private_zone = aws
        .call(zone(naming::private_zone(&input.name, &input.base_domain)))
        .await?;
    aws.on_rollback(Delete(private_zone.clone()));
    let local_zone = aws.call(zone(naming::local_zone(&input.name))).await?;
    aws.on_rollback(Delete(local_zone.clone()));
    Ok(Network {
        vpc_id,
        private_subnets: zones.iter().map(|z| z.private.clone()).collect(),
        public_subnets: zones.iter().map(|z| z.public.clone()).collect(),
        nat_gateways: zones.into_iter().map(|z| z.nat).collect(),
        private_zone,
        local_zone,
    })
}

async fn oidc(
    aws: &AwsCalls,
    input: &Input,
    infra_id: &str,
    bucket_region: &str,
) -> Result<(SigningKey, OidcDocuments, OidcProvider), WorkflowError> {
    let signing_key = aws
        .call(GenerateSigningKey {
            infra_id: infra_id.to_owned(),
        })
        .await?;
    let documents = aws
        .call(PublishOidcDocuments {
            infra_id: infra_id.to_owned(),
            bucket: input.oidc_bucket.clone(),
            bucket_region: bucket_region.to_owned(),
            jwk: signing_key.jwk.clone(),
        })
        .await?;
    aws.on_rollback(Delete(documents.clone()));
    let provider = aws
        .call(CreateOidcProvider {
            infra_id: infra_id.to_owned(),
            issuer_url: documents.issuer_url.clone(),
            resource_tags: input.resource_tags.clone(),
        })
        .await?;
    aws.on_rollback(Delete(provider.clone()));
    Ok((signing_key, documents, provider))
}

async fn iam(
    ctx: &WorkflowContext,
    aws: &AwsCalls,
    infra_id: &str,
    resource_tags: &ResourceTags,
    provider: &OidcProvider,
    public_zone_id: &str,
    network: &Network,
) -> Result<(Vec<(String, Role)>, WorkerProfile), WorkflowError> {
    let roles = ctx
        .join_all(OPERATOR_ROLES.iter().map(|(suffix, _)| async move {
            let role = aws
                .call(CreateOperatorRole {
                    infra_id: infra_id.to_owned(),
                    role: (*suffix).to_owned(),
                    provider_arn: provider.arn.clone(),
                    issuer: provider.issuer.clone(),
                    public_zone_id: public_zone_id.to_owned(),
                    private_zone_id: network.private_zone.zone_id.clone(),
                    local_zone_id: network.local_zone.zone_id.clone(),
                    resource_tags: resource_tags.clone(),
                })
                .await?;
            aws.on_rollback(Delete(role.clone()));
            Ok::<_, WorkflowError>(((*suffix).to_owned(), role))
        }))
        .await
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?;
    let worker = aws
        .call(CreateWorkerProfile {
            infra_id: infra_id.to_owned(),
            resource_tags: resource_tags.clone(),
        })
        .await?;
    aws.on_rollback(Delete(worker.clone()));
    Ok((roles, worker))
}

/// Every NodePool applied at 0 replicas, each with its compensation (their subnets tell
/// the operator where the PrivateLink endpoint goes).
async fn apply_node_pools(
    ctx: &WorkflowContext,
    input: &Input,
    infra_id: &str,
    network: &Network,
    worker: &WorkerProfile,
) -> Result<(), WorkflowError> {
    for pool in &input.node_pools {
        let subnet_id = network
            .private_subnets
            .iter()
            .find(|s| s.zone == pool.zone)
            .map(|s| s.subnet_id.clone())
            .unwrap_or_default();
        let applied = ctx
            .activity(ApplyNodePool {
                infra_id: infra_id.to_owned(),
                cluster: input.name.clone(),
                namespace: input.namespace.clone(),
                name: pool.name.clone(),
                release_image: input.release_image.clone(),
                zone: pool.zone.clone(),
                subnet_id,
                instance_type: pool.instance_type(),
                arch: pool.arch.clone(),
                instance_profile: worker.instance_profile_name.clone(),
                replicas: 0,
                annotations: pool.annotations.clone(),
            })
            .await?;
        ctx.on_rollback(Delete(applied));
    }
    Ok(())
}

/// Every NodePool scaled out, in parallel, and waited for.
async fn scale_out_node_pools(
    ctx: &WorkflowContext,
    input: &Input,
) -> Result<BTreeMap<String, i32>, WorkflowError> {
    let timeout_secs = input
        .node_pool_timeout_secs
        .unwrap_or(DEFAULT_NODE_POOL_TIMEOUT_SECS);
    let scale_out = |pool: &NodePoolSpec| {
        let namespace = input.namespace.clone();
        let name = pool.name.clone();
        let replicas = pool.replicas;
        async move {
            ctx.activity(ScaleNodePool {
                namespace: namespace.clone(),
                name: name.clone(),
                replicas,
            })
            .await?;
            let ready = ctx
                .activity(WaitNodePoolReady {
                    namespace,
                    name: name.clone(),
                    replicas,
                    timeout_secs,
                })
                .await?;
            Ok::<_, WorkflowError>((name, ready.ready))
        }
    };
    ctx.join_all(input.node_pools.iter().map(scale_out))
        .await
        .into_iter()
        .collect()
}
