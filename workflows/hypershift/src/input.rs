//! The inputs of the three workflows (DESIGN.md §5, a public contract) and the
//! validation of a create's input: every problem reported at once, each naming its
//! field, never quoting a secret.

use std::collections::{BTreeMap, BTreeSet};

use hcpflow_engine::scrub_quoted;
use serde::{Deserialize, Serialize};

use crate::aws_accounts::is_account_name;
use crate::network_plan;
use crate::pull_secret_ref::{is_region, PullSecretRef};
use crate::resource_tags::ResourceTags;
use crate::shape::{self, optional, required, Field, Kind};

const MANAGEMENT_FIELDS: &[Field] = &[
    required("vpc_id", Kind::String),
    required("subnet_ids", Kind::StringList),
];

const NODE_POOL_FIELDS: &[Field] = &[
    required("name", Kind::String),
    required("zone", Kind::String),
    required("replicas", Kind::Integer),
    optional("instance_type", Kind::String),
    optional("arch", Kind::String),
    optional("annotations", Kind::StringMap),
];

const PULL_SECRET_REF_FIELDS: &[Field] = &[
    optional("kubernetes", Kind::Object(KUBERNETES_SECRET_REF_FIELDS)),
    optional(
        "aws_secrets_manager",
        Kind::Object(SECRETS_MANAGER_REF_FIELDS),
    ),
];

const KUBERNETES_SECRET_REF_FIELDS: &[Field] = &[
    required("namespace", Kind::String),
    required("name", Kind::String),
    optional("key", Kind::String),
];

const SECRETS_MANAGER_REF_FIELDS: &[Field] = &[required("arn", Kind::String)];

/// The fields of [`CreateClusterInput`], checked all at once before decoding.
const CREATE_FIELDS: &[Field] = &[
    required("name", Kind::String),
    optional("infra_id", Kind::String),
    required("region", Kind::String),
    required("zones", Kind::StringList),
    required("base_domain", Kind::String),
    required("endpoint_access", Kind::String),
    required("vpc_cidr", Kind::String),
    required("oidc_bucket", Kind::String),
    optional("namespace", Kind::String),
    optional("management", Kind::Object(MANAGEMENT_FIELDS)),
    required("release_image", Kind::String),
    optional("pull_secret", Kind::String),
    optional("pull_secret_ref", Kind::Object(PULL_SECRET_REF_FIELDS)),
    required("ssh_public_key", Kind::String),
    optional("node_pools", Kind::ObjectList(NODE_POOL_FIELDS)),
    optional("keep_on_failure", Kind::Bool),
    optional("control_plane_timeout_secs", Kind::Integer),
    optional("node_pool_timeout_secs", Kind::Integer),
    optional("availability_policy", Kind::String),
    optional("resource_tags", Kind::StringMap),
    optional("annotations", Kind::StringMap),
    optional("aws_account", Kind::String),
    optional("management_aws_account", Kind::String),
];

const SCALE_FIELDS: &[Field] = &[
    required("cluster", Kind::String),
    required("node_pool", Kind::String),
    required("replicas", Kind::Integer),
    optional("timeout_secs", Kind::Integer),
];

const DESTROY_FIELDS: &[Field] = &[required("cluster", Kind::String)];

/// Decodes `input` as `T`, with its shape problems. Where the shape is wrong, a
/// repaired copy is decoded so that the fields that are there can still be checked:
/// every problem is reported at once. A body that is not even an object gets only that.
fn decode<T: serde::de::DeserializeOwned>(
    input: &serde_json::Value,
    fields: &[Field],
) -> Result<(T, Vec<String>), Vec<String>> {
    let problems = shape::problems(input, fields);
    if !input.is_object() {
        return Err(problems);
    }
    let value = if problems.is_empty() {
        input.clone()
    } else {
        shape::repaired(input, fields)
    };
    match serde_json::from_value(value) {
        Ok(decoded) => Ok((decoded, problems)),
        Err(e) if problems.is_empty() => {
            Err(vec![format!("input: {}", scrub_quoted(&e.to_string()))])
        }
        Err(_) => Err(problems),
    }
}

fn verdict(problems: Vec<String>) -> Result<(), Vec<String>> {
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}

/// The longest infra id: AWS names built from it (`<infra-id>-<suffix>`) must fit.
pub const MAX_INFRA_ID: usize = 27;
/// `<name>-` plus 5 characters when the infra id is derived.
const DERIVED_SUFFIX: usize = 6;
pub const ENDPOINT_ACCESS: [&str; 3] = ["Public", "PublicAndPrivate", "Private"];
pub const DEFAULT_NAMESPACE: &str = "clusters";
pub const DEFAULT_CONTROL_PLANE_TIMEOUT_SECS: u64 = 30 * 60;
pub const DEFAULT_NODE_POOL_TIMEOUT_SECS: u64 = 45 * 60;
const MAX_REPLICAS: i32 = 500;

/// `create_hosted_cluster`'s input. `S` is the pull secret: plaintext where intake
/// validates it, sealed (`Sealed<String>`) from then on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateClusterInput<S> {
    pub name: String,
    #[serde(default)]
    pub infra_id: Option<String>,
    pub region: String,
    pub zones: Vec<String>,
    pub base_domain: String,
    pub endpoint_access: String,
    pub vpc_cidr: String,
    pub oidc_bucket: String,
    #[serde(default = "default_namespace")]
    pub namespace: String,
    #[serde(default)]
    pub management: Option<Management>,
    pub release_image: String,
    /// The `.dockerconfigjson` inline (dev stacks). Exactly one of `pull_secret` and
    /// `pull_secret_ref` is given.
    #[serde(default = "Option::default", skip_serializing_if = "Option::is_none")]
    pub pull_secret: Option<S>,
    /// Where the server reads the `.dockerconfigjson` (production).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_secret_ref: Option<PullSecretRef>,
    pub ssh_public_key: String,
    #[serde(default)]
    pub node_pools: Vec<NodePoolSpec>,
    #[serde(default)]
    pub keep_on_failure: bool,
    /// How long the control plane may take to become Available.
    #[serde(default)]
    pub control_plane_timeout_secs: Option<u64>,
    /// How long a NodePool may take to reach its replicas.
    #[serde(default)]
    pub node_pool_timeout_secs: Option<u64>,
    /// `SingleReplica` (the default) or `HighlyAvailable`: the control plane's and the
    /// guest infrastructure's availability policy.
    #[serde(default)]
    pub availability_policy: Option<String>,
    /// Tags for every AWS object of the cluster, hcpflow's and the operators' (see
    /// [`ResourceTags`]).
    #[serde(default)]
    pub resource_tags: ResourceTags,
    /// Annotations for the HostedCluster (the local emulator's failure injection).
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// The account of the hosted cluster's objects, by its name in the server's
    /// configuration (see [`crate::aws_accounts`]); none: the server's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aws_account: Option<String>,
    /// The account of the management side (the OIDC bucket, the management VPC); none:
    /// the server's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub management_aws_account: Option<String>,
}

/// The availability policies of the HyperShift API.
pub const AVAILABILITY_POLICIES: [&str; 2] = ["SingleReplica", "HighlyAvailable"];

/// The NodePool architectures HyperShift supports on AWS.
pub const ARCHES: [&str; 2] = ["amd64", "arm64"];

/// The architecture of an EC2 instance type: Graviton families (`m6g`, `c7gn`, `t4g`,
/// `r8gd` …: a `g` right after the generation digit) are arm64, the rest amd64.
pub fn arch_of_instance_type(instance_type: &str) -> &'static str {
    let family = instance_type.split('.').next().unwrap_or_default();
    let generation_end = family
        .char_indices()
        .skip_while(|(_, c)| c.is_ascii_alphabetic())
        .find(|(_, c)| !c.is_ascii_digit())
        .map(|(i, _)| i);
    match generation_end {
        Some(i)
            if family[..i].chars().any(|c| c.is_ascii_digit()) && family[i..].starts_with('g') =>
        {
            "arm64"
        }
        _ => "amd64",
    }
}

fn default_namespace() -> String {
    DEFAULT_NAMESPACE.to_owned()
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Management {
    pub vpc_id: String,
    pub subnet_ids: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodePoolSpec {
    pub name: String,
    pub zone: String,
    pub replicas: i32,
    /// The EC2 instance type; by default [`DEFAULT_INSTANCE_TYPE`] for the pool's
    /// architecture.
    #[serde(default)]
    pub instance_type: Option<String>,
    /// `amd64` or `arm64`; by default the instance type's.
    #[serde(default)]
    pub arch: Option<String>,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

/// The instance type of a pool that names none, by architecture.
pub const DEFAULT_INSTANCE_TYPE: [(&str, &str); 2] =
    [("amd64", "m6i.xlarge"), ("arm64", "m6g.xlarge")];

impl NodePoolSpec {
    /// The instance type: as given, else the default of the pool's architecture.
    pub fn instance_type(&self) -> String {
        if let Some(given) = &self.instance_type {
            return given.clone();
        }
        let arch = self.arch.as_deref().unwrap_or("amd64");
        DEFAULT_INSTANCE_TYPE
            .iter()
            .find(|(a, _)| *a == arch)
            .unwrap_or(&DEFAULT_INSTANCE_TYPE[0])
            .1
            .to_owned()
    }
}

/// `scale_node_pool`'s input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScaleInput {
    pub cluster: String,
    pub node_pool: String,
    pub replicas: i32,
    #[serde(default)]
    pub timeout_secs: Option<u64>,
}

/// `destroy_hosted_cluster`'s input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DestroyInput {
    pub cluster: String,
}

/// A DNS-1123 label: lowercase letters, digits and '-', starting and ending with a
/// letter or digit, at most `max` characters.
pub fn is_dns_label(text: &str, max: usize) -> bool {
    let bytes = text.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= max
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes[0] != b'-'
        && bytes[bytes.len() - 1] != b'-'
}

pub(crate) fn is_dns_subdomain(text: &str) -> bool {
    text.len() <= 253 && text.split('.').all(|label| is_dns_label(label, 63))
}

impl<S> CreateClusterInput<S> {
    /// The infra id: as given, or `<name>-` plus 5 characters derived from the
    /// workflow id (stable across replays).
    pub fn infra_id_for(&self, workflow_id: &str) -> String {
        if let Some(id) = &self.infra_id {
            return id.clone();
        }
        // FNV-1a: a fixed, dependency-free hash, so the id never changes between
        // versions of this code.
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for byte in workflow_id.bytes() {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
        const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
        let suffix: String = (0..5)
            .map(|i| ALPHABET[((hash >> (i * 6)) % 36) as usize] as char)
            .collect();
        format!("{}-{suffix}", self.name)
    }

    pub fn is_public(&self) -> bool {
        self.endpoint_access == "Public"
    }

    /// Every problem with the input, each naming its field.
    pub fn problems(&self, pull_secret_is_json: Option<bool>) -> Vec<String> {
        let mut problems = Vec::new();
        let mut problem = |text: String| problems.push(text);
        let name_max = if self.infra_id.is_some() {
            63
        } else {
            MAX_INFRA_ID - DERIVED_SUFFIX
        };
        if !is_dns_label(&self.name, name_max) {
            problem(format!(
                "name: {:?} must be a DNS-1123 label (lowercase letters, digits, '-') of at most {name_max} characters",
                self.name
            ));
        }
        if let Some(infra_id) = &self.infra_id {
            if !is_dns_label(infra_id, MAX_INFRA_ID) {
                problem(format!(
                    "infra_id: {infra_id:?} must be a DNS-1123 label of at most {MAX_INFRA_ID} characters"
                ));
            }
        }
        if !is_region(&self.region) {
            problem(format!(
                "region: {:?} is not an AWS region (us-east-1, eu-central-1, ...)",
                self.region
            ));
        }
        let mut seen = BTreeSet::new();
        for zone in &self.zones {
            if zone.trim().is_empty() {
                problem("zones: a zone is empty".into());
            } else if !seen.insert(zone.as_str()) {
                problem(format!("zones: {zone:?} is listed twice"));
            }
        }
        if self.zones.is_empty() {
            problem("zones: at least one zone is needed".into());
        } else if self.zones.len() > network_plan::MAX_ZONES {
            problem(format!(
                "zones: {} given; a /16 holds at most {}",
                self.zones.len(),
                network_plan::MAX_ZONES
            ));
        }
        if let Err(e) = network_plan::parse_slash16(&self.vpc_cidr) {
            problem(format!("vpc_cidr: {e}"));
        }
        if !is_dns_subdomain(&self.base_domain) {
            problem(format!(
                "base_domain: {:?} is not a DNS name",
                self.base_domain
            ));
        }
        if !ENDPOINT_ACCESS.contains(&self.endpoint_access.as_str()) {
            problem(format!(
                "endpoint_access: {:?} must be one of {}",
                self.endpoint_access,
                ENDPOINT_ACCESS.join(", ")
            ));
        }
        let bucket_ok = (3..=63).contains(&self.oidc_bucket.len())
            && self
                .oidc_bucket
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
        if !bucket_ok {
            problem(format!(
                "oidc_bucket: {:?} is not an S3 bucket name",
                self.oidc_bucket
            ));
        }
        if !is_dns_label(&self.namespace, 63) {
            problem(format!(
                "namespace: {:?} must be a DNS-1123 label",
                self.namespace
            ));
        }
        match &self.management {
            None if !self.is_public()
                && ENDPOINT_ACCESS.contains(&self.endpoint_access.as_str()) =>
            {
                problem(format!(
                    "management: required when endpoint_access is {} (the management VPC and subnets of PrivateLink)",
                    self.endpoint_access
                ));
            }
            Some(management) => {
                if management.vpc_id.trim().is_empty() {
                    problem("management.vpc_id: must not be empty".into());
                }
                if management.subnet_ids.is_empty() {
                    problem("management.subnet_ids: at least one subnet is needed".into());
                }
            }
            None => {}
        }
        if self.release_image.trim().is_empty() {
            problem("release_image: must not be empty".into());
        }
        match (&self.pull_secret, &self.pull_secret_ref) {
            (Some(_), None) => {
                if pull_secret_is_json == Some(false) {
                    problem("pull_secret: must be a JSON document (the .dockerconfigjson)".into());
                }
            }
            (None, Some(reference)) => {
                for text in reference.problems("pull_secret_ref") {
                    problem(text);
                }
            }
            (Some(_), Some(_)) => {
                problem("pull_secret, pull_secret_ref: give one of them, not both".into())
            }
            (None, None) => problem(
                "pull_secret: required, or pull_secret_ref naming where the server reads it".into(),
            ),
        }
        if self.ssh_public_key.trim().is_empty() {
            problem("ssh_public_key: must not be empty".into());
        }
        for (field, account) in [
            ("aws_account", &self.aws_account),
            ("management_aws_account", &self.management_aws_account),
        ] {
            if let Some(account) = account.as_deref().filter(|a| !is_account_name(a)) {
                problem(format!(
                    "{field}: {account:?} is not an account name (a name from the server's --aws-account)"
                ));
            }
        }
        if let Some(policy) = &self.availability_policy {
            if !AVAILABILITY_POLICIES.contains(&policy.as_str()) {
                problem(format!(
                    "availability_policy: {policy:?} is not one of {}",
                    AVAILABILITY_POLICIES.join(", ")
                ));
            }
        }
        for tag_problem in self.resource_tags.problems() {
            problem(tag_problem);
        }
        let mut pool_names = BTreeSet::new();
        for (index, pool) in self.node_pools.iter().enumerate() {
            let at = format!("node_pools[{index}]");
            if !is_dns_label(&pool.name, 63) {
                problem(format!(
                    "{at}.name: {:?} must be a DNS-1123 label",
                    pool.name
                ));
            } else if !pool_names.insert(pool.name.as_str()) {
                problem(format!("{at}.name: {:?} is used twice", pool.name));
            }
            if !self.zones.contains(&pool.zone) {
                problem(format!(
                    "{at}.zone: {:?} is not one of the cluster's zones",
                    pool.zone
                ));
            }
            if !(0..=MAX_REPLICAS).contains(&pool.replicas) {
                problem(format!(
                    "{at}.replicas: {} must be between 0 and {MAX_REPLICAS}",
                    pool.replicas
                ));
            }
            if pool
                .instance_type
                .as_deref()
                .is_some_and(|t| t.trim().is_empty())
            {
                problem(format!("{at}.instance_type: must not be empty"));
            }
            if let Some(arch) = &pool.arch {
                if !ARCHES.contains(&arch.as_str()) {
                    problem(format!(
                        "{at}.arch: {arch:?} is not one of {}",
                        ARCHES.join(", ")
                    ));
                } else if let Some(instance_type) = &pool.instance_type {
                    let of_type = arch_of_instance_type(instance_type);
                    if of_type != arch {
                        problem(format!(
                            "{at}.arch: {arch} does not match instance type {instance_type} ({of_type})"
                        ));
                    }
                }
            }
        }
        problems
    }
}

/// Intake's check of a create: decodes the plaintext input and reports every problem.
pub fn validate_create(input: &serde_json::Value) -> Result<(), Vec<String>> {
    let (decoded, shape): (CreateClusterInput<String>, _) = decode(input, CREATE_FIELDS)?;
    // Sealed values (a resubmission) cannot be read here; plaintext must be JSON.
    let is_json = match &decoded.pull_secret {
        Some(secret) if !secret.starts_with("sealed:") => {
            Some(serde_json::from_str::<serde_json::Value>(secret).is_ok_and(|v| v.is_object()))
        }
        _ => None,
    };
    verdict(shape::merge(shape, decoded.problems(is_json)))
}

/// Intake's check of a scale.
pub fn validate_scale(input: &serde_json::Value) -> Result<(), Vec<String>> {
    let (decoded, shape): (ScaleInput, _) = decode(input, SCALE_FIELDS)?;
    let mut problems = Vec::new();
    if !is_dns_label(&decoded.cluster, 63) {
        problems.push(format!(
            "cluster: {:?} is not a cluster name",
            decoded.cluster
        ));
    }
    if !is_dns_label(&decoded.node_pool, 63) {
        problems.push(format!(
            "node_pool: {:?} is not a NodePool name",
            decoded.node_pool
        ));
    }
    if !(0..=MAX_REPLICAS).contains(&decoded.replicas) {
        problems.push(format!(
            "replicas: {} must be between 0 and {MAX_REPLICAS}",
            decoded.replicas
        ));
    }
    verdict(shape::merge(shape, problems))
}

/// Intake's check of a destroy.
pub fn validate_destroy(input: &serde_json::Value) -> Result<(), Vec<String>> {
    let (decoded, shape): (DestroyInput, _) = decode(input, DESTROY_FIELDS)?;
    let mut problems = Vec::new();
    if !is_dns_label(&decoded.cluster, 63) {
        problems.push(format!(
            "cluster: {:?} is not a cluster name",
            decoded.cluster
        ));
    }
    verdict(shape::merge(shape, problems))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn valid() -> serde_json::Value {
        json!({"name": "demo", "region": "us-east-1",
               "zones": ["us-east-1a", "us-east-1b", "us-east-1c"], "base_domain": "example.com",
               "endpoint_access": "PublicAndPrivate", "vpc_cidr": "10.0.0.0/16",
               "oidc_bucket": "hcpflow-oidc",
               "management": {"vpc_id": "vpc-1", "subnet_ids": ["subnet-1"]},
               "release_image": "quay.io/openshift-release-dev/ocp-release:4.17.0-x86_64",
               "pull_secret": "{\"auths\": {}}", "ssh_public_key": "ssh-ed25519 AAAA",
               "node_pools": [{"name": "demo-us-east-1a", "zone": "us-east-1a", "replicas": 2}]})
    }

    #[test]
    fn a_valid_input_passes_and_gets_a_stable_infra_id() {
        validate_create(&valid()).unwrap();
        let input: CreateClusterInput<String> = serde_json::from_value(valid()).unwrap();
        let id = input.infra_id_for("wf-1");
        assert_eq!(id, input.infra_id_for("wf-1"));
        assert_ne!(id, input.infra_id_for("wf-2"));
        assert!(id.starts_with("demo-") && id.len() == 10 && is_dns_label(&id, MAX_INFRA_ID));
        assert_eq!(input.namespace, "clusters");
    }

    #[test]
    fn the_architecture_follows_the_instance_type_unless_given_and_must_match_it() {
        for (instance_type, arch) in [
            ("m6i.xlarge", "amd64"),
            ("m5.large", "amd64"),
            ("m6g.large", "arm64"),
            ("c7gn.2xlarge", "arm64"),
            ("t4g.micro", "arm64"),
            ("r8gd.metal", "arm64"),
            ("g5.xlarge", "amd64"),
            ("g5g.xlarge", "arm64"),
            ("inf2.xlarge", "amd64"),
        ] {
            assert_eq!(
                arch_of_instance_type(instance_type),
                arch,
                "{instance_type}"
            );
        }
        let pool = |arch: Option<&str>, instance_type: Option<&str>| NodePoolSpec {
            name: "p".into(),
            zone: "us-east-1a".into(),
            replicas: 1,
            instance_type: instance_type.map(str::to_owned),
            arch: arch.map(str::to_owned),
            annotations: BTreeMap::new(),
        };
        assert_eq!(pool(None, None).instance_type(), "m6i.xlarge");
        assert_eq!(pool(Some("arm64"), None).instance_type(), "m6g.xlarge");
        assert_eq!(pool(None, Some("c7g.large")).instance_type(), "c7g.large");

        let mut input = valid();
        input["node_pools"][0]["arch"] = json!("arm64");
        input["node_pools"][0]["instance_type"] = json!("m6i.xlarge");
        input["availability_policy"] = json!("Sometimes");
        let text = validate_create(&input).unwrap_err().join("\n");
        assert!(
            text.contains(
                "node_pools[0].arch: arm64 does not match instance type m6i.xlarge (amd64)"
            ),
            "{text}"
        );
        assert!(
            text.contains("availability_policy: \"Sometimes\""),
            "{text}"
        );
        input["node_pools"][0]["arch"] = json!("s390x");
        input["availability_policy"] = json!("HighlyAvailable");
        let text = validate_create(&input).unwrap_err().join("\n");
        assert!(
            text.contains("node_pools[0].arch: \"s390x\" is not one of amd64, arm64"),
            "{text}"
        );
        input["node_pools"][0]["arch"] = json!("arm64");
        input["node_pools"][0]["instance_type"] = json!("m6g.large");
        validate_create(&input).unwrap();
    }

    #[test]
    fn resource_tags_are_checked_with_the_rest() {
        let mut input = valid();
        input["resource_tags"] = json!({"team": "platform", "bad key": "x", "Name": "mine"});
        input["name"] = json!("Demo_Cluster");
        let text = validate_create(&input).unwrap_err().join("\n");
        assert!(text.contains("name:"), "{text}");
        assert!(text.contains("resource_tags: key \"bad key\""), "{text}");
        assert!(
            text.contains("resource_tags: key \"Name\" is set by"),
            "{text}"
        );
        input["resource_tags"] = json!({"team": 7});
        let text = validate_create(&input).unwrap_err().join("\n");
        assert!(text.contains("resource_tags"), "{text}");
    }

    #[test]
    fn every_problem_is_reported_at_once_and_secrets_are_not_quoted() {
        let mut input = valid();
        input["name"] = json!("Demo_Cluster");
        input["vpc_cidr"] = json!("10.0.0.0/24");
        input["zones"] = json!(["us-east-1a", "us-east-1a"]);
        input["endpoint_access"] = json!("Private");
        input.as_object_mut().unwrap().remove("management");
        input["node_pools"][0]["zone"] = json!("us-east-1z");
        input["pull_secret"] = json!("hunter2-not-json");
        input["aws_account"] = json!("Guest Account");
        input["management_aws_account"] = json!("");
        let problems = validate_create(&input).unwrap_err();
        let text = problems.join("\n");
        for field in [
            "name:",
            "vpc_cidr:",
            "zones:",
            "management:",
            "node_pools[0].zone:",
            "pull_secret:",
            "aws_account: \"Guest Account\" is not an account name",
            "management_aws_account: \"\" is not an account name",
        ] {
            assert!(text.contains(field), "{field} missing from {text}");
        }
        assert!(!text.contains("hunter2"), "{text}");
        let mut typo = valid();
        typo["pull_secert"] = json!("hunter2");
        let problems = validate_create(&typo).unwrap_err();
        assert!(
            problems[0].contains("pull_secert") && !problems[0].contains("hunter2"),
            "{problems:?}"
        );
    }

    #[test]
    fn missing_and_mistyped_fields_are_all_named() {
        let mut input = valid();
        let fields = input.as_object_mut().unwrap();
        fields.remove("zones");
        fields.remove("release_image");
        fields.insert("keep_on_failure".into(), json!("yes"));
        input["node_pools"][0]["replicas"] = json!("2");
        input["name"] = json!("Not_A_Name");
        let problems = validate_create(&input).unwrap_err();
        assert_eq!(
            &problems[..4],
            &[
                "zones: required",
                "release_image: required",
                "node_pools[0].replicas: must be an integer, not a string",
                "keep_on_failure: must be a boolean, not a string",
            ]
        );
        // The fields that are there are checked too; nothing about the placeholders.
        assert!(
            problems.iter().any(|p| p.starts_with("name:")),
            "{problems:?}"
        );
        assert!(
            !problems[4..]
                .iter()
                .any(|p| p.starts_with("zones:") || p.starts_with("release_image:")),
            "{problems:?}"
        );
        assert_eq!(
            validate_scale(&json!({"replicas": "four"})).unwrap_err(),
            vec![
                "cluster: required",
                "node_pool: required",
                "replicas: must be an integer, not a string"
            ]
        );
    }

    #[test]
    fn a_region_is_an_aws_region() {
        let mut input = valid();
        input["region"] = json!("useast1");
        let problems = validate_create(&input).unwrap_err().join("; ");
        assert!(
            problems.contains("region: \"useast1\" is not an AWS region"),
            "{problems}"
        );
        input["region"] = json!("us-gov-west-1");
        assert_eq!(validate_create(&input), Ok(()));
    }

    #[test]
    fn a_create_gives_its_pull_secret_inline_or_by_reference_never_both() {
        let mut by_reference = valid();
        by_reference.as_object_mut().unwrap().remove("pull_secret");
        by_reference["pull_secret_ref"] =
            json!({"kubernetes": {"namespace": "pull-secrets", "name": "team-a"}});
        assert_eq!(validate_create(&by_reference), Ok(()));

        let mut both = by_reference.clone();
        both["pull_secret"] = valid()["pull_secret"].clone();
        assert!(validate_create(&both).unwrap_err()[0].contains("not both"));
        let mut neither = by_reference.clone();
        neither.as_object_mut().unwrap().remove("pull_secret_ref");
        assert!(validate_create(&neither).unwrap_err()[0].contains("pull_secret_ref"));
        let mut misspelt = by_reference;
        misspelt["pull_secret_ref"] = json!({"kubernetes": {"namespace": "x", "nmae": "y"}});
        let problems = validate_create(&misspelt).unwrap_err().join("; ");
        assert!(problems.contains("nmae"), "{problems}");
    }

    /// The field tables checked before decoding must list exactly the structs' fields.
    #[test]
    fn the_field_tables_match_the_input_structs() {
        fn names(fields: &[Field]) -> Vec<&str> {
            let mut names: Vec<&str> = fields.iter().map(|f| f.name).collect();
            names.sort_unstable();
            names
        }
        fn keys(value: &serde_json::Value) -> Vec<&str> {
            let mut keys: Vec<&str> = value
                .as_object()
                .unwrap()
                .keys()
                .map(String::as_str)
                .collect();
            keys.sort_unstable();
            keys
        }
        let mut input: CreateClusterInput<String> = serde_json::from_value(valid()).unwrap();
        // Both sources at once: only to see every field serialized.
        input.pull_secret_ref = Some(
            serde_json::from_value(json!({
                "kubernetes": {"namespace": "n", "name": "s"},
                "aws_secrets_manager": {"arn": "a"}}))
            .unwrap(),
        );
        input.aws_account = Some("guest".into());
        input.management_aws_account = Some("management".into());
        let create = serde_json::to_value(&input).unwrap();
        assert_eq!(keys(&create), names(CREATE_FIELDS));
        let reference = &create["pull_secret_ref"];
        assert_eq!(keys(reference), names(PULL_SECRET_REF_FIELDS));
        assert_eq!(
            keys(&reference["kubernetes"]),
            names(KUBERNETES_SECRET_REF_FIELDS)
        );
        assert_eq!(
            keys(&reference["aws_secrets_manager"]),
            names(SECRETS_MANAGER_REF_FIELDS)
        );
        assert_eq!(keys(&create["management"]), names(MANAGEMENT_FIELDS));
        assert_eq!(keys(&create["node_pools"][0]), names(NODE_POOL_FIELDS));
        let scale = ScaleInput {
            cluster: "c".into(),
            node_pool: "p".into(),
            replicas: 1,
            timeout_secs: None,
        };
        assert_eq!(
            keys(&serde_json::to_value(scale).unwrap()),
            names(SCALE_FIELDS)
        );
        let destroy = DestroyInput {
            cluster: "c".into(),
        };
        assert_eq!(
            keys(&serde_json::to_value(destroy).unwrap()),
            names(DESTROY_FIELDS)
        );
    }

    #[test]
    fn public_needs_no_management_and_an_infra_id_is_at_most_27() {
        let mut input = valid();
        input["endpoint_access"] = json!("Public");
        input.as_object_mut().unwrap().remove("management");
        validate_create(&input).unwrap();
        input["infra_id"] = json!("a-very-long-infra-id-that-is-too-long");
        assert!(validate_create(&input).unwrap_err()[0].starts_with("infra_id:"));
        validate_scale(&json!({"cluster": "demo", "node_pool": "p", "replicas": 4})).unwrap();
        assert!(
            validate_scale(&json!({"cluster": "demo", "node_pool": "p", "replicas": -1})).is_err()
        );
        assert!(validate_destroy(&json!({"cluster": "demo", "force": true})).is_err());
    }
}
