//! The guest cluster's own cloud resources: what the components running in (or for) a
//! hosted cluster make in the customer's account once it has nodes, and what the
//! control plane removes of them on deletion only when asked to.
//!
//! Made once a reconciled HostedCluster's API server is up and its NodePools have a node
//! (their `status.replicas`, summed), each found again by name or tag, so another pass or
//! an emulator restart does not duplicate anything:
//!
//! - `router`: the default IngressController's `openshift-ingress/router-default`
//!   Service of type LoadBalancer → the cloud provider's classic ELB and its
//!   `k8s-elb-<name>` security group (cloud-provider-aws `aws.go`:
//!   `EnsureLoadBalancer`, `ensureSecurityGroup`);
//! - `ingress_record`: the ingress operator's `*.apps.<name>.<baseDomain>` record in the
//!   public zone, pointing at that ELB (cluster-ingress-operator `pkg/dns/aws`);
//! - `workload`: a user workload's `default/guest-app` Service of type LoadBalancer with
//!   the `nlb` annotation → a v2 network load balancer and its target group
//!   (cloud-provider-aws `aws_loadbalancer.go`: `ensureLoadBalancerv2`);
//! - `volume`: a PersistentVolume of a `default/guest-data` claim → an EBS volume made by
//!   the EBS CSI driver (aws-ebs-csi-driver `CreateVolume`);
//! - `registry`: the image registry's S3 bucket (cluster-image-registry-operator
//!   `pkg/storage/s3`: `CreateStorage`, `GenerateStorageName`).
//!
//! The load balancers sit in the guest VPC's public subnets — those whose `Name` tag
//! contains `-public-`, as `hypershift create infra aws` names them — or, without any,
//! in the NodePools' subnets; one per zone (the lowest id), as the cloud provider picks
//! them. The volume is in the zone of the first NodePool subnet.
//!
//! The guest components act with their own roles (ingress, image registry, storage,
//! cloud controller); the emulator does not check those roles' permissions: every call
//! is made with the management account's credentials.
//!
//! On deletion (`destroy`), what the hosted cluster config operator asks for when the
//! HostedCluster carries `hypershift.openshift.io/cleanup-cloud-resources: "true"`
//! (hostedclusterconfigoperator/controllers/resources/resources.go:
//! `ensureCloudResourcesDestroyed`): the registry storage removed, the ingress
//! controllers (their record and router Service) deleted, the LoadBalancer Services and
//! the PersistentVolumes gone — each guest component removes its part, and what is
//! still found is reported by the HCCO's names (`image-registry`,
//! `ingress-controllers`, `loadbalancers`, `persistent-volumes`).

mod ingress_record;
mod registry;
mod router;
mod volume;
mod workload;

use std::collections::BTreeMap;

use aws_sdk_ec2::types::Filter;

use super::aws::{sdk, AwsError, Clients, Service};
use super::load_balancer::hash;
use super::spec::Cluster;

/// Where the guest's load balancers and volume go.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Placement {
    /// One subnet per zone, sorted.
    subnets: Vec<String>,
    /// The volume's availability zone.
    zone: String,
}

/// A node port for one of a Service's ports (30000-32767), the same on every pass.
fn node_port(cluster: &Cluster, service: &str, port: &str) -> i32 {
    let seed = hash(&[&cluster.uid, service, port]);
    let value = u32::from_str_radix(&seed[..6], 16).unwrap_or(0);
    30000 + (value % 2768) as i32
}

/// The guest's resource tags: `spec.platform.aws.resourceTags` with
/// `kubernetes.io/cluster/<infraID>=owned` (the Infrastructure's `resourceTags`, which
/// every guest component adds to what it makes).
fn owned_tags(cluster: &Cluster) -> Vec<(String, String)> {
    cluster.resource_tags.clone()
}

fn ec2_filter(name: &str, value: &str) -> Filter {
    Filter::builder().name(name).values(value).build()
}

/// `(subnet id, zone, Name tag)` of the subnets in the guest VPC.
async fn vpc_subnets(
    clients: &Clients,
    cluster: &Cluster,
) -> Result<Vec<(String, String, String)>, AwsError> {
    let described = clients
        .ec2
        .describe_subnets()
        .filters(ec2_filter("vpc-id", &cluster.vpc))
        .send()
        .await
        .map_err(|e| sdk(Service::Ec2, "DescribeSubnets", e))?;
    Ok(described
        .subnets()
        .iter()
        .map(|subnet| {
            let name = subnet
                .tags()
                .iter()
                .find(|t| t.key() == Some("Name"))
                .and_then(|t| t.value())
                .unwrap_or_default();
            (
                subnet.subnet_id().unwrap_or_default().to_owned(),
                subnet.availability_zone().unwrap_or_default().to_owned(),
                name.to_owned(),
            )
        })
        .collect())
}

/// The lowest subnet id of each zone, sorted.
fn one_per_zone(subnets: &[(String, String)]) -> Vec<String> {
    let mut by_zone: BTreeMap<&str, &str> = BTreeMap::new();
    for (id, zone) in subnets {
        match by_zone.get(zone.as_str()) {
            Some(existing) if *existing <= id.as_str() => {}
            _ => {
                by_zone.insert(zone, id);
            }
        }
    }
    let mut picked: Vec<String> = by_zone.into_values().map(str::to_owned).collect();
    picked.sort();
    picked
}

async fn placement(clients: &Clients, cluster: &Cluster) -> Result<Placement, String> {
    if cluster.vpc.is_empty() {
        return Err("no VPC in spec.platform.aws.cloudProviderConfig".into());
    }
    let mut known = vpc_subnets(clients, cluster)
        .await
        .map_err(|e| e.go_error())?;
    let missing: Vec<String> = cluster
        .node_pool_subnets
        .iter()
        .filter(|id| !known.iter().any(|(k, _, _)| k == *id))
        .cloned()
        .collect();
    if !missing.is_empty() {
        let described = clients
            .ec2
            .describe_subnets()
            .set_subnet_ids(Some(missing))
            .send()
            .await
            .map_err(|e| sdk(Service::Ec2, "DescribeSubnets", e).go_error())?;
        known.extend(described.subnets().iter().map(|s| {
            (
                s.subnet_id().unwrap_or_default().to_owned(),
                s.availability_zone().unwrap_or_default().to_owned(),
                String::new(),
            )
        }));
    }
    let public: Vec<(String, String)> = known
        .iter()
        .filter(|(_, _, name)| name.contains("-public-"))
        .map(|(id, zone, _)| (id.clone(), zone.clone()))
        .collect();
    let pools: Vec<(String, String)> = known
        .iter()
        .filter(|(id, _, _)| cluster.node_pool_subnets.contains(id))
        .map(|(id, zone, _)| (id.clone(), zone.clone()))
        .collect();
    let subnets = one_per_zone(if public.is_empty() { &pools } else { &public });
    if subnets.is_empty() {
        return Err(
            "could not find any suitable subnets for creating the ELB (no public subnet in the VPC and no NodePool subnet)"
                .into(),
        );
    }
    let zone_of = |id: &str| {
        known
            .iter()
            .find(|(k, _, _)| k == id)
            .map(|(_, zone, _)| zone.clone())
    };
    let zone = cluster
        .node_pool_subnets
        .first()
        .and_then(|id| zone_of(id))
        .or_else(|| subnets.first().and_then(|id| zone_of(id)))
        .unwrap_or_default();
    Ok(Placement { subnets, zone })
}

/// Makes whatever of the guest's resources is missing; `Err` with what failed (each
/// component is tried, whatever another's fate).
pub(super) async fn ensure(
    clients: &Clients,
    cluster: &Cluster,
    region: &str,
) -> Result<(), String> {
    let placement = placement(clients, cluster).await?;
    let mut failures = Vec::new();
    match router::ensure(clients, cluster, &placement).await {
        Ok(dns_name) => {
            if let Err(e) = ingress_record::ensure(clients, cluster, &dns_name).await {
                failures.push(format!("the ingress operator's record: {e}"));
            }
        }
        Err(e) => failures.push(format!("router-default's load balancer: {e}")),
    }
    if let Err(e) = workload::ensure(clients, cluster, &placement).await {
        failures.push(format!("guest-app's load balancer: {e}"));
    }
    if let Err(e) = volume::ensure(clients, cluster, &placement.zone).await {
        failures.push(format!("the persistent volume: {e}"));
    }
    if let Err(e) = registry::ensure(clients, cluster, region).await {
        failures.push(format!("the image registry's bucket: {e}"));
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("; "))
    }
}

/// One pass of the guest's cleanup: each component removes what it made; the HCCO's
/// names of what was still there (and so remains, as the real cleanup reports it on
/// the pass it asks for the deletions), in its order.
pub(super) async fn destroy(clients: &Clients, cluster: &Cluster) -> Vec<&'static str> {
    let there = |what: &str, result: Result<bool, AwsError>| match result {
        Ok(found) => found,
        Err(e) => {
            tracing::warn!(cluster = %cluster.name, %what, error = %e, "the guest cannot remove it yet");
            true
        }
    };
    let mut remaining = Vec::new();
    if there(
        "the image registry's bucket",
        registry::destroy(clients, cluster).await,
    ) {
        remaining.push("image-registry");
    }
    let record = there(
        "the *.apps record",
        ingress_record::destroy(clients, cluster).await,
    );
    let router = there(
        "router-default's load balancer",
        router::destroy(clients, cluster).await,
    );
    if record || router {
        remaining.push("ingress-controllers");
    }
    let workload = there(
        "guest-app's load balancer",
        workload::destroy(clients, cluster).await,
    );
    if router || workload {
        remaining.push("loadbalancers");
    }
    if there(
        "the persistent volume",
        volume::destroy(clients, cluster).await,
    ) {
        remaining.push("persistent-volumes");
    }
    remaining
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_subnet_per_zone_the_lowest_id() {
        let subnets = [
            ("subnet-b".to_owned(), "us-east-1a".to_owned()),
            ("subnet-a".to_owned(), "us-east-1a".to_owned()),
            ("subnet-c".to_owned(), "us-east-1b".to_owned()),
        ];
        assert_eq!(one_per_zone(&subnets), ["subnet-a", "subnet-c"]);
    }
}
