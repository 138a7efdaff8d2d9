//! The HostedCluster and NodePool documents, built from a request (hypershift-aws.md
//! §6.1): what `hypershift create cluster aws` would submit for the same cluster.

use std::collections::BTreeMap;

use hcpflow_engine::ActivityFailure;
use hcpflow_hypershift::input::{arch_of_instance_type, AVAILABILITY_POLICIES};
use hcpflow_hypershift::kube::hosted_cluster::CreateHostedCluster;
use hcpflow_hypershift::kube::node_pool::ApplyNodePool;
use hcpflow_hypershift::kube::INFRA_LABEL;
use serde_json::{json, Value};

use crate::resources::{HYPERSHIFT_GROUP, HYPERSHIFT_VERSION};

/// The seven `spec.platform.aws.rolesRef` fields, every one required.
pub const ROLES_REF_FIELDS: [&str; 7] = [
    "ingressARN",
    "imageRegistryARN",
    "storageARN",
    "networkARN",
    "kubeCloudControllerARN",
    "nodePoolManagementARN",
    "controlPlaneOperatorARN",
];

/// AWS accepts at most 50 tags; HyperShift passes at most 25 through `resourceTags`.
const MAX_RESOURCE_TAGS: usize = 25;

const ENDPOINT_ACCESS: [&str; 3] = ["Public", "PublicAndPrivate", "Private"];

fn invalid(message: String) -> ActivityFailure {
    ActivityFailure::permanent("InvalidInput", message)
}

fn api_version() -> String {
    format!("{HYPERSHIFT_GROUP}/{HYPERSHIFT_VERSION}")
}

/// The HostedCluster of `request`.
///
/// Errors: a permanent `InvalidInput` for a missing role ARN, an unknown endpoint
/// access or too many resource tags — nothing is sent.
pub fn hosted_cluster(request: &CreateHostedCluster) -> Result<Value, ActivityFailure> {
    let missing: Vec<&str> = ROLES_REF_FIELDS
        .into_iter()
        .filter(|field| {
            request
                .roles_ref
                .get(*field)
                .is_none_or(|arn| arn.is_empty())
        })
        .collect();
    if !missing.is_empty() {
        return Err(invalid(format!(
            "HostedCluster {}: rolesRef is missing {}",
            request.name,
            missing.join(", ")
        )));
    }
    if let Some(unknown) = request
        .roles_ref
        .keys()
        .find(|field| !ROLES_REF_FIELDS.contains(&field.as_str()))
    {
        return Err(invalid(format!(
            "HostedCluster {}: rolesRef has no field {unknown}",
            request.name
        )));
    }
    if !ENDPOINT_ACCESS.contains(&request.endpoint_access.as_str()) {
        return Err(invalid(format!(
            "HostedCluster {}: endpoint access {:?} is not one of {}",
            request.name,
            request.endpoint_access,
            ENDPOINT_ACCESS.join(", ")
        )));
    }
    let owned_tag = format!("kubernetes.io/cluster/{}", request.infra_id);
    let mut tags: BTreeMap<&str, &str> = request.resource_tags.iter().collect();
    tags.insert(&owned_tag, "owned");
    if tags.len() > MAX_RESOURCE_TAGS {
        return Err(invalid(format!(
            "HostedCluster {}: {} resource tags, at most {MAX_RESOURCE_TAGS} with the owned tag",
            request.name,
            tags.len()
        )));
    }
    let resource_tags: Vec<Value> = tags
        .into_iter()
        .map(|(key, value)| json!({"key": key, "value": value}))
        .collect();
    let availability_policy = request
        .availability_policy
        .as_deref()
        .unwrap_or(AVAILABILITY_POLICIES[0]);
    if !AVAILABILITY_POLICIES.contains(&availability_policy) {
        return Err(invalid(format!(
            "HostedCluster {}: availability policy {availability_policy:?} is not one of {}",
            request.name,
            AVAILABILITY_POLICIES.join(", ")
        )));
    }
    // As `hypershift create cluster aws` publishes them, whatever the endpoint access:
    // the API server by LoadBalancer (a Route would need a dedicated hostname), the
    // others by Route. With PrivateLink the operator exposes them through its private
    // router.
    let api_server = json!({"type": "LoadBalancer"});
    let route = json!({"type": "Route"});
    let document = json!({
        "apiVersion": api_version(),
        "kind": "HostedCluster",
        "metadata": {
            "name": request.name,
            "namespace": request.namespace,
            "labels": {INFRA_LABEL: request.infra_id},
            "annotations": request.annotations,
        },
        "spec": {
            "infraID": request.infra_id,
            "issuerURL": request.issuer_url,
            "release": {"image": request.release_image},
            "pullSecret": {"name": request.secrets.pull_secret},
            "sshKey": {"name": request.secrets.ssh_key},
            "secretEncryption": {
                "type": "aescbc",
                "aescbc": {"activeKey": {"name": request.secrets.etcd_encryption_key}},
            },
            "serviceAccountSigningKey": {"name": request.secrets.service_account_signing_key},
            "networking": {
                "networkType": "OVNKubernetes",
                "machineNetwork": [{"cidr": request.vpc_cidr}],
                "clusterNetwork": [{"cidr": "10.132.0.0/14"}],
                "serviceNetwork": [{"cidr": "172.31.0.0/16"}],
            },
            "dns": {
                "baseDomain": request.base_domain,
                "publicZoneID": request.public_zone_id,
                "privateZoneID": request.private_zone_id,
            },
            "platform": {
                "type": "AWS",
                "aws": {
                    "region": request.region,
                    "endpointAccess": request.endpoint_access,
                    "rolesRef": request.roles_ref,
                    "cloudProviderConfig": {
                        "vpc": request.vpc_id,
                        "subnet": {"id": request.subnet_id},
                        "zone": request.zone,
                    },
                    "resourceTags": resource_tags,
                },
            },
            "services": [
                {"service": "APIServer", "servicePublishingStrategy": api_server},
                {"service": "OAuthServer", "servicePublishingStrategy": route},
                {"service": "Konnectivity", "servicePublishingStrategy": route},
                {"service": "Ignition", "servicePublishingStrategy": route},
            ],
            "etcd": {
                "managementType": "Managed",
                "managed": {"storage": {
                    "type": "PersistentVolume",
                    "persistentVolume": {"size": "8Gi"},
                }},
            },
            "controllerAvailabilityPolicy": availability_policy,
            "infrastructureAvailabilityPolicy": availability_policy,
        },
    });
    let problems = publishing_problems(&document["spec"]);
    if !problems.is_empty() {
        return Err(invalid(format!(
            "HostedCluster {}: the operator would refuse its services: {}",
            request.name,
            problems.join("; ")
        )));
    }
    Ok(document)
}

/// The hypershift-operator's `validateAWSConfig` on a HostedCluster spec: OAuthServer,
/// Konnectivity and Ignition by Route; the API server by LoadBalancer, or by Route with
/// a hostname (a private cluster may use either). What it refuses never reaches it.
pub fn publishing_problems(spec: &Value) -> Vec<String> {
    let strategy = |service: &str| {
        spec.get("services")
            .and_then(Value::as_array)
            .and_then(|all| all.iter().find(|s| s["service"] == service))
            .map(|s| &s["servicePublishingStrategy"])
    };
    let mut problems = Vec::new();
    for service in ["OAuthServer", "Konnectivity", "Ignition"] {
        match strategy(service).map(|s| s["type"].as_str().unwrap_or_default()) {
            None => problems.push(format!("{service} is not published")),
            Some("Route") => {}
            Some(other) => problems.push(format!(
                "{service} is published by {other:?}; only Route is supported"
            )),
        }
    }
    let Some(api_server) = strategy("APIServer") else {
        problems.push("APIServer is not published".to_owned());
        return problems;
    };
    let has_hostname = api_server
        .pointer("/route/hostname")
        .and_then(Value::as_str)
        .is_some_and(|h| !h.is_empty());
    match (api_server["type"].as_str().unwrap_or_default(), has_hostname) {
        ("LoadBalancer", _) | ("Route", true) => {}
        ("Route", false) => {
            problems.push("APIServer is published by Route without a hostname".to_owned());
        }
        (other, _) => problems.push(format!(
            "APIServer is published by {other:?}; only LoadBalancer, or Route with a hostname, is supported"
        )),
    }
    problems
}

/// The NodePool of `request`, with `replicas` as its count.
pub fn node_pool(request: &ApplyNodePool, replicas: i32) -> Result<Value, ActivityFailure> {
    if replicas < 0 {
        return Err(invalid(format!(
            "NodePool {}: replicas {replicas} is negative",
            request.name
        )));
    }
    Ok(json!({
        "apiVersion": api_version(),
        "kind": "NodePool",
        "metadata": {
            "name": request.name,
            "namespace": request.namespace,
            "labels": {INFRA_LABEL: request.infra_id},
            "annotations": request.annotations,
        },
        "spec": {
            "clusterName": request.cluster,
            "release": {"image": request.release_image},
            "replicas": replicas,
            "arch": request
                .arch
                .as_deref()
                .unwrap_or_else(|| arch_of_instance_type(&request.instance_type)),
            "management": {"upgradeType": "Replace", "autoRepair": false},
            "platform": {
                "type": "AWS",
                "aws": {
                    "instanceType": request.instance_type,
                    "instanceProfile": request.instance_profile,
                    "subnet": {"id": request.subnet_id},
                    "rootVolume": {"size": 120, "type": "gp3"},
                },
            },
        },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hcpflow_hypershift::kube::secrets::Secrets;

    fn request() -> CreateHostedCluster {
        CreateHostedCluster {
            infra_id: "demo-x7k2p".into(),
            name: "demo".into(),
            namespace: "clusters".into(),
            release_image: "quay.io/openshift-release-dev/ocp-release:4.17.0-x86_64".into(),
            region: "us-east-1".into(),
            endpoint_access: "PublicAndPrivate".into(),
            base_domain: "example.com".into(),
            public_zone_id: "Z1".into(),
            private_zone_id: "Z2".into(),
            issuer_url: "https://b.s3.us-east-1.amazonaws.com/demo-x7k2p".into(),
            vpc_id: "vpc-1".into(),
            vpc_cidr: "10.0.0.0/16".into(),
            zone: "us-east-1a".into(),
            subnet_id: "subnet-1".into(),
            roles_ref: ROLES_REF_FIELDS
                .iter()
                .map(|f| (f.to_string(), format!("arn:aws:iam::1:role/{f}")))
                .collect(),
            secrets: Secrets {
                infra_id: "demo-x7k2p".into(),
                namespace: "clusters".into(),
                pull_secret: "demo-pull-secret".into(),
                ssh_key: "demo-ssh-key".into(),
                etcd_encryption_key: "demo-etcd-encryption-key".into(),
                service_account_signing_key: "demo-sa-token-issuer-key".into(),
            },
            resource_tags: Default::default(),
            availability_policy: None,
            annotations: BTreeMap::new(),
        }
    }

    #[test]
    fn the_hosted_cluster_carries_the_platform_fields_and_the_secret_references() {
        let hc = hosted_cluster(&request()).unwrap();
        assert_eq!(hc["metadata"]["labels"][INFRA_LABEL], "demo-x7k2p");
        assert_eq!(hc["spec"]["infraID"], "demo-x7k2p");
        assert_eq!(hc["spec"]["platform"]["type"], "AWS");
        assert_eq!(
            hc["spec"]["serviceAccountSigningKey"]["name"],
            "demo-sa-token-issuer-key"
        );
        assert_eq!(
            hc["spec"]["platform"]["aws"]["rolesRef"]["controlPlaneOperatorARN"],
            "arn:aws:iam::1:role/controlPlaneOperatorARN"
        );
        assert_eq!(
            hc["spec"]["platform"]["aws"]["resourceTags"],
            json!([{"key": "kubernetes.io/cluster/demo-x7k2p", "value": "owned"}])
        );
        assert_eq!(hc["spec"]["dns"]["privateZoneID"], "Z2");
    }

    #[test]
    fn the_availability_policy_is_given_to_both_fields_and_defaults_to_single_replica() {
        let hc = hosted_cluster(&request()).unwrap();
        assert_eq!(hc["spec"]["controllerAvailabilityPolicy"], "SingleReplica");
        assert_eq!(
            hc["spec"]["infrastructureAvailabilityPolicy"],
            "SingleReplica"
        );
        let mut ha = request();
        ha.availability_policy = Some("HighlyAvailable".into());
        let hc = hosted_cluster(&ha).unwrap();
        assert_eq!(
            hc["spec"]["controllerAvailabilityPolicy"],
            "HighlyAvailable"
        );
        assert_eq!(
            hc["spec"]["infrastructureAvailabilityPolicy"],
            "HighlyAvailable"
        );
        ha.availability_policy = Some("Always".into());
        assert!(hosted_cluster(&ha).is_err());
    }

    #[test]
    fn a_node_pool_s_arch_is_given_or_its_instance_type_s() {
        let mut pool = ApplyNodePool {
            infra_id: "demo-x7k2p".into(),
            cluster: "demo".into(),
            namespace: "clusters".into(),
            name: "demo-us-east-1a".into(),
            release_image: "quay.io/openshift-release-dev/ocp-release:4.17.0-multi".into(),
            zone: "us-east-1a".into(),
            subnet_id: "subnet-1".into(),
            instance_type: "m6g.large".into(),
            arch: None,
            instance_profile: "demo-x7k2p-worker".into(),
            replicas: 0,
            annotations: BTreeMap::new(),
        };
        assert_eq!(node_pool(&pool, 1).unwrap()["spec"]["arch"], "arm64");
        pool.instance_type = "m6i.xlarge".into();
        assert_eq!(node_pool(&pool, 1).unwrap()["spec"]["arch"], "amd64");
        pool.arch = Some("arm64".into());
        assert_eq!(node_pool(&pool, 1).unwrap()["spec"]["arch"], "arm64");
    }

    #[test]
    fn every_access_mode_publishes_as_the_operator_requires() {
        for access in ENDPOINT_ACCESS {
            let mut request = request();
            request.endpoint_access = access.into();
            let hc = hosted_cluster(&request).unwrap();
            assert!(publishing_problems(&hc["spec"]).is_empty(), "{access}");
            let api = hc["spec"]["services"]
                .as_array()
                .unwrap()
                .iter()
                .find(|s| s["service"] == "APIServer")
                .unwrap();
            assert_eq!(
                api["servicePublishingStrategy"],
                json!({"type": "LoadBalancer"}),
                "{access}"
            );
        }
    }

    #[test]
    fn what_the_operator_refuses_is_named() {
        let spec = |api: Value, oauth: &str| {
            json!({"services": [
                {"service": "APIServer", "servicePublishingStrategy": api},
                {"service": "OAuthServer", "servicePublishingStrategy": {"type": oauth}},
                {"service": "Konnectivity", "servicePublishingStrategy": {"type": "Route"}},
            ]})
        };
        assert_eq!(
            publishing_problems(&spec(json!({"type": "Route"}), "LoadBalancer")),
            [
                "OAuthServer is published by \"LoadBalancer\"; only Route is supported",
                "Ignition is not published",
                "APIServer is published by Route without a hostname",
            ]
        );
        let named = json!({"type": "Route", "route": {"hostname": "api.example.com"}});
        assert_eq!(
            publishing_problems(&spec(named, "Route")),
            ["Ignition is not published"]
        );
    }

    #[test]
    fn a_missing_role_or_an_unknown_access_is_rejected_before_anything_is_sent() {
        let mut missing = request();
        missing.roles_ref.remove("storageARN");
        let failure = hosted_cluster(&missing).unwrap_err();
        assert_eq!(failure.kind, "InvalidInput");
        assert!(failure.message.contains("storageARN"));
        let mut access = request();
        access.endpoint_access = "Internal".into();
        assert!(!hosted_cluster(&access).unwrap_err().retryable);
    }
}
