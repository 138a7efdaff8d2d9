//! What the cloud side reads of a HostedCluster and its NodePools: the fields the
//! operators' AWS code uses, taken once per pass from a snapshot of the store.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::store::meta;

use super::CLEANUP_CLOUD_RESOURCES;

/// The services the control-plane-operator publishes privately, with their ports
/// (`vpcEndpointPort`) and the records `recordsForService` gives them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PrivateService {
    pub(super) name: &'static str,
    pub(super) port: i32,
    /// The record names in `<cluster>.hypershift.local`.
    pub(super) records: Vec<&'static str>,
}

pub(super) const PRIVATE_ROUTER: &str = "private-router";
pub(super) const KUBE_APISERVER_PRIVATE: &str = "kube-apiserver-private";

/// Both services, with every record either may have had: what deletion looks for.
pub(super) fn all_private_services() -> Vec<PrivateService> {
    vec![
        PrivateService {
            name: PRIVATE_ROUTER,
            port: 443,
            records: vec!["api", "*.apps"],
        },
        PrivateService {
            name: KUBE_APISERVER_PRIVATE,
            port: 6443,
            records: vec!["api"],
        },
    ]
}

/// One HostedCluster as the operators see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Cluster {
    pub(super) namespace: String,
    pub(super) name: String,
    pub(super) uid: String,
    pub(super) generation: i64,
    pub(super) deleting: bool,
    pub(super) aws: bool,
    pub(super) infra_id: String,
    pub(super) endpoint_access: String,
    /// `spec.platform.aws.cloudProviderConfig.vpc`.
    pub(super) vpc: String,
    /// Whether `cloudProviderConfig.subnet.id` is set (`hasAWSConfig`).
    pub(super) has_subnet: bool,
    pub(super) machine_cidrs: Vec<String>,
    /// `resourceTags`, with `kubernetes.io/cluster/<infraID>=owned` as the
    /// hypershift-operator adds it to the spec (`reconcileAWSResourceTags`) before any
    /// control-plane component reads it.
    pub(super) resource_tags: Vec<(String, String)>,
    pub(super) cpo_role_arn: String,
    /// `spec.issuerURL`: the issuer of the CPO's service-account token.
    pub(super) issuer_url: String,
    pub(super) additional_principals: Vec<String>,
    /// The APIServer's publishing strategy type.
    pub(super) api_server: String,
    /// `status.platform.aws.defaultWorkerSecurityGroupID`.
    pub(super) default_security_group: Option<String>,
    /// `(type, status)` of the status conditions.
    pub(super) conditions: Vec<(String, String)>,
    /// The subnet ids of its NodePools, sorted, once each (`listSubnetIDs`).
    pub(super) node_pool_subnets: Vec<String>,
    /// The nodes its NodePools have (`status.replicas`, summed): the guest cluster's own
    /// components run on them.
    pub(super) ready_nodes: i64,
    /// `hypershift.openshift.io/cleanup-cloud-resources: "true"`
    /// (`CleanupCloudResourcesAnnotation`).
    pub(super) cleanup_cloud_resources: bool,
    /// `hcpflow.io/emulator-guest-unreachable: "true"` (the emulator's fault).
    pub(super) guest_unreachable: bool,
    /// `spec.platform.aws.region`.
    pub(super) region: String,
    /// `spec.dns.baseDomain`.
    pub(super) base_domain: String,
    /// `spec.dns.baseDomainPrefix`: `None` when unset (the cluster's name is used).
    pub(super) base_domain_prefix: Option<String>,
    /// `spec.dns.publicZoneID`.
    pub(super) public_zone_id: String,
}

fn text(value: &Value, pointer: &str) -> String {
    value
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

impl Cluster {
    pub(super) fn read(hosted_cluster: &Value, node_pools: &[Value]) -> Self {
        let metadata = meta(hosted_cluster);
        let namespace = metadata
            .get("namespace")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let name = metadata
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let infra_id = text(hosted_cluster, "/spec/infraID");
        let aws = hosted_cluster.pointer("/spec/platform/aws");
        let mut resource_tags: Vec<(String, String)> = aws
            .and_then(|a| a.get("resourceTags"))
            .and_then(Value::as_array)
            .map(|tags| {
                tags.iter()
                    .map(|t| (text(t, "/key"), text(t, "/value")))
                    .collect()
            })
            .unwrap_or_default();
        if !infra_id.is_empty() {
            let owned = format!("kubernetes.io/cluster/{infra_id}");
            match resource_tags.iter_mut().find(|(k, _)| *k == owned) {
                Some(tag) => tag.1 = "owned".into(),
                None => resource_tags.push((owned, "owned".into())),
            }
        }
        let machine_cidrs = hosted_cluster
            .pointer("/spec/networking/machineNetwork")
            .and_then(Value::as_array)
            .map(|list| list.iter().map(|n| text(n, "/cidr")).collect())
            .unwrap_or_default();
        let api_server = hosted_cluster
            .pointer("/spec/services")
            .and_then(Value::as_array)
            .and_then(|services| services.iter().find(|s| s["service"] == "APIServer"))
            .map(|s| text(s, "/servicePublishingStrategy/type"))
            .unwrap_or_default();
        let conditions = hosted_cluster
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .map(|list| {
                list.iter()
                    .map(|c| (text(c, "/type"), text(c, "/status")))
                    .collect()
            })
            .unwrap_or_default();
        let own_pools: Vec<&Value> = node_pools
            .iter()
            .filter(|pool| meta(pool).get("namespace").and_then(Value::as_str) == Some(&namespace))
            .filter(|pool| text(pool, "/spec/clusterName") == name)
            .collect();
        let node_pool_subnets: BTreeSet<String> = own_pools
            .iter()
            .map(|pool| text(pool, "/spec/platform/aws/subnet/id"))
            .filter(|id| !id.is_empty())
            .collect();
        let ready_nodes = own_pools
            .iter()
            .filter_map(|pool| pool.pointer("/status/replicas").and_then(Value::as_i64))
            .sum();
        let cleanup_cloud_resources = metadata
            .get("annotations")
            .and_then(|a| a.get(CLEANUP_CLOUD_RESOURCES))
            .and_then(Value::as_str)
            == Some("true");
        let guest_unreachable = metadata
            .get("annotations")
            .and_then(|a| a.get(crate::operator::GUEST_UNREACHABLE))
            .and_then(Value::as_str)
            == Some("true");
        let default_security_group = Some(text(
            hosted_cluster,
            "/status/platform/aws/defaultWorkerSecurityGroupID",
        ))
        .filter(|id| !id.is_empty());
        Self {
            uid: metadata
                .get("uid")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            generation: metadata
                .get("generation")
                .and_then(Value::as_i64)
                .unwrap_or(1),
            deleting: metadata.contains_key("deletionTimestamp"),
            aws: text(hosted_cluster, "/spec/platform/type") == "AWS" && aws.is_some(),
            endpoint_access: text(hosted_cluster, "/spec/platform/aws/endpointAccess"),
            vpc: text(hosted_cluster, "/spec/platform/aws/cloudProviderConfig/vpc"),
            has_subnet: !text(
                hosted_cluster,
                "/spec/platform/aws/cloudProviderConfig/subnet/id",
            )
            .is_empty(),
            machine_cidrs,
            resource_tags,
            cpo_role_arn: text(
                hosted_cluster,
                "/spec/platform/aws/rolesRef/controlPlaneOperatorARN",
            ),
            issuer_url: text(hosted_cluster, "/spec/issuerURL"),
            additional_principals: aws
                .and_then(|a| a.get("additionalAllowedPrincipals"))
                .and_then(Value::as_array)
                .map(|list| {
                    list.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default(),
            api_server,
            default_security_group,
            conditions,
            node_pool_subnets: node_pool_subnets.into_iter().collect(),
            ready_nodes,
            cleanup_cloud_resources,
            guest_unreachable,
            region: text(hosted_cluster, "/spec/platform/aws/region"),
            base_domain: text(hosted_cluster, "/spec/dns/baseDomain"),
            base_domain_prefix: hosted_cluster
                .pointer("/spec/dns/baseDomainPrefix")
                .and_then(Value::as_str)
                .map(str::to_owned),
            public_zone_id: text(hosted_cluster, "/spec/dns/publicZoneID"),
            namespace,
            name,
            infra_id,
        }
    }

    pub(super) fn is(&self, kind: &str, status: &str) -> bool {
        self.conditions
            .iter()
            .any(|(k, s)| k == kind && s == status)
    }

    /// The hypershift-operator reconciles it (`ValidConfiguration` and
    /// `SupportedHostedCluster` True) and it has a control plane: not `Degraded`
    /// Unknown, which the HostedCluster controller reports when there is no
    /// HostedControlPlane ("The hosted control plane is not found") — as for a
    /// HostedCluster whose pull secret was missing from the start.
    pub(super) fn reconciled(&self) -> bool {
        self.is("ValidConfiguration", "True")
            && self.is("SupportedHostedCluster", "True")
            && !self.is("Degraded", "Unknown")
    }

    /// It has (or had) a HostedControlPlane: reconciled now, or its control plane made
    /// the default security group before.
    pub(super) fn has_control_plane(&self) -> bool {
        self.reconciled() || self.default_security_group.is_some()
    }

    /// The guest cluster runs: its API server is up and it has nodes for its own
    /// components (ingress, registry, storage, workloads).
    pub(super) fn guest_running(&self) -> bool {
        self.is("KubeAPIServerAvailable", "True") && self.ready_nodes > 0
    }

    /// `netutil.IsPrivateHCP`: PublicAndPrivate or Private.
    pub(super) fn private(&self) -> bool {
        matches!(
            self.endpoint_access.as_str(),
            "PublicAndPrivate" | "Private"
        )
    }

    /// `manifests.HostedControlPlaneNamespace`.
    pub(super) fn control_plane_namespace(&self) -> String {
        format!("{}-{}", self.namespace, self.name)
    }

    /// The private Services the control-plane-operator makes (infra.go): the private
    /// router always, `kube-apiserver-private` when the API server is published by
    /// LoadBalancer; with the API server behind a Route the router also carries `api`.
    pub(super) fn private_services(&self) -> Vec<PrivateService> {
        if !self.private() {
            return Vec::new();
        }
        if self.api_server == "LoadBalancer" {
            vec![
                PrivateService {
                    name: PRIVATE_ROUTER,
                    port: 443,
                    records: vec!["*.apps"],
                },
                PrivateService {
                    name: KUBE_APISERVER_PRIVATE,
                    port: 6443,
                    records: vec!["api"],
                },
            ]
        } else {
            vec![PrivateService {
                name: PRIVATE_ROUTER,
                port: 443,
                records: vec!["api", "*.apps"],
            }]
        }
    }

    /// The guest's DNS base domain (support/globalconfig/dns.go `BaseDomain`): `<prefix>.<baseDomain>`, the
    /// prefix being the cluster's name unless `baseDomainPrefix` is set (empty: none).
    pub(super) fn cluster_domain(&self) -> String {
        match self.base_domain_prefix.as_deref() {
            Some("") => self.base_domain.clone(),
            Some(prefix) => format!("{prefix}.{}", self.base_domain),
            None => format!("{}.{}", self.name, self.base_domain),
        }
    }

    /// `<name>.hypershift.local`, the guest's private zone (`zoneName`).
    pub(super) fn local_zone(&self) -> String {
        format!("{}.hypershift.local", self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn with(conditions: &[(&str, &str)]) -> Cluster {
        let conditions: Vec<Value> = conditions
            .iter()
            .map(|(kind, status)| json!({"type": kind, "status": status}))
            .collect();
        Cluster::read(
            &json!({"metadata": {"name": "c", "namespace": "ns", "uid": "u"},
                    "spec": {"platform": {"type": "AWS", "aws": {"region": "us-east-1"}}},
                    "status": {"conditions": conditions}}),
            &[],
        )
    }

    #[test]
    fn only_a_cluster_with_a_control_plane_is_reconciled() {
        let valid = [
            ("ValidConfiguration", "True"),
            ("SupportedHostedCluster", "True"),
        ];
        assert!(with(&valid).reconciled());
        let mut rolling = valid.to_vec();
        rolling.push(("Degraded", "True"));
        assert!(with(&rolling).reconciled());
        // The pull secret was missing from the start: no HostedControlPlane.
        let mut without = valid.to_vec();
        without.push(("Degraded", "Unknown"));
        assert!(!with(&without).reconciled());
        assert!(!with(&without).has_control_plane());
        assert!(!with(&[("ValidConfiguration", "False")]).reconciled());
    }
}
