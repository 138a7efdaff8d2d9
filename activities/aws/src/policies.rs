//! IAM policy documents, carried as data with the cluster's zone ids as parameters.
//!
//! The documents (`activities/aws/policies/*.json`) are the permissions HyperShift's
//! operators need; `${PUBLIC_ZONE_ID}`, `${PRIVATE_ZONE_ID}` and `${LOCAL_ZONE_ID}` scope
//! the Route53 permissions to this cluster's own zones.

use serde_json::Value;

/// The zone ids a cluster's policies are scoped to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneIds {
    /// The public zone of the base domain (a prerequisite).
    pub public: String,
    /// `<name>.<base_domain>`, created by the network step.
    pub private: String,
    /// `<name>.hypershift.local`, created by the network step.
    pub local: String,
}

/// Which document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    Ingress,
    ImageRegistry,
    EbsCsiDriver,
    CloudController,
    NodePool,
    ControlPlaneOperator,
    CloudNetworkConfig,
    Worker,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error("zone id {0:?} is not a Route53 zone id")]
    InvalidZoneId(String),
    #[error("policy {policy:?} still has a parameter after rendering: {placeholder}")]
    Unresolved { policy: Policy, placeholder: String },
    #[error("policy {policy:?} is not valid JSON: {reason}")]
    Invalid { policy: Policy, reason: String },
}

impl Policy {
    pub const ALL: [Policy; 8] = [
        Policy::Ingress,
        Policy::ImageRegistry,
        Policy::EbsCsiDriver,
        Policy::CloudController,
        Policy::NodePool,
        Policy::ControlPlaneOperator,
        Policy::CloudNetworkConfig,
        Policy::Worker,
    ];

    fn template(self) -> &'static str {
        match self {
            Policy::Ingress => include_str!("../policies/openshift-ingress.json"),
            Policy::ImageRegistry => include_str!("../policies/openshift-image-registry.json"),
            Policy::EbsCsiDriver => include_str!("../policies/aws-ebs-csi-driver-controller.json"),
            Policy::CloudController => include_str!("../policies/cloud-controller.json"),
            Policy::NodePool => include_str!("../policies/node-pool.json"),
            Policy::ControlPlaneOperator => include_str!("../policies/control-plane-operator.json"),
            Policy::CloudNetworkConfig => {
                include_str!("../policies/cloud-network-config-controller.json")
            }
            Policy::Worker => include_str!("../policies/worker.json"),
        }
    }

    /// The document for this cluster's zones.
    pub fn render(self, zones: &ZoneIds) -> Result<Value, PolicyError> {
        for id in [&zones.public, &zones.private, &zones.local] {
            // Route53 ids are upper-case letters and digits; anything else would let a
            // value break out of the ARN it is spliced into.
            if id.is_empty()
                || id.len() > 32
                || !id
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
            {
                return Err(PolicyError::InvalidZoneId(id.clone()));
            }
        }
        let text = self
            .template()
            .replace("${PUBLIC_ZONE_ID}", &zones.public)
            .replace("${PRIVATE_ZONE_ID}", &zones.private)
            .replace("${LOCAL_ZONE_ID}", &zones.local);
        if let Some(start) = text.find("${") {
            let placeholder = text[start..]
                .chars()
                .take_while(|c| *c != '}')
                .collect::<String>()
                + "}";
            return Err(PolicyError::Unresolved {
                policy: self,
                placeholder,
            });
        }
        serde_json::from_str(&text).map_err(|e| PolicyError::Invalid {
            policy: self,
            reason: e.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// The reviewed list of every role's allowed actions, kept beside the documents.
    const ACTIONS_TABLE: &str = include_str!("../policies/actions.tsv");

    fn zones() -> ZoneIds {
        ZoneIds {
            public: "Z0PUBLIC1".into(),
            private: "Z0PRIVATE2".into(),
            local: "Z0LOCAL3".into(),
        }
    }

    fn resources(policy: &Value) -> Vec<String> {
        policy["Statement"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|s| match &s["Resource"] {
                Value::String(r) => vec![r.clone()],
                Value::Array(rs) => rs.iter().map(|r| r.as_str().unwrap().to_owned()).collect(),
                _ => vec![],
            })
            .collect()
    }

    #[test]
    fn every_policy_renders_to_a_complete_document() {
        for policy in Policy::ALL {
            let doc = policy.render(&zones()).unwrap();
            assert_eq!(doc["Version"], "2012-10-17", "{policy:?}");
            assert!(
                !doc["Statement"].as_array().unwrap().is_empty(),
                "{policy:?}"
            );
        }
    }

    #[test]
    fn route53_permissions_are_scoped_to_this_clusters_zones() {
        let ingress = resources(&Policy::Ingress.render(&zones()).unwrap());
        assert!(ingress.contains(&"arn:aws:route53:::hostedzone/Z0PUBLIC1".to_owned()));
        assert!(ingress.contains(&"arn:aws:route53:::hostedzone/Z0PRIVATE2".to_owned()));
        let cpo = resources(&Policy::ControlPlaneOperator.render(&zones()).unwrap());
        assert!(cpo.contains(&"arn:aws:route53:::hostedzone/Z0LOCAL3".to_owned()));
        for policy in Policy::ALL {
            let text = policy.render(&zones()).unwrap().to_string();
            for example in [
                "Z093004827I7TY8DW3Z9K",
                "Z04148342DPTGWECPH7M5",
                "Z0498824N2ZYL62T258T",
            ] {
                assert!(
                    !text.contains(example),
                    "{policy:?} kept an example zone id"
                );
            }
        }
    }

    /// The name a document has in the table: its file name without `.json`.
    fn table_name(policy: Policy) -> &'static str {
        match policy {
            Policy::Ingress => "openshift-ingress",
            Policy::ImageRegistry => "openshift-image-registry",
            Policy::EbsCsiDriver => "aws-ebs-csi-driver-controller",
            Policy::CloudController => "cloud-controller",
            Policy::NodePool => "node-pool",
            Policy::ControlPlaneOperator => "control-plane-operator",
            Policy::CloudNetworkConfig => "cloud-network-config-controller",
            Policy::Worker => "worker",
        }
    }

    fn strings(value: &Value) -> Vec<String> {
        match value {
            Value::String(s) => vec![s.clone()],
            Value::Array(items) => items
                .iter()
                .map(|i| i.as_str().expect("a string").to_owned())
                .collect(),
            other => panic!("expected a string or a list of strings, got {other}"),
        }
    }

    /// One `action<TAB>resource<TAB>condition` line per action the rendered document
    /// allows, sorted; the same action twice in one statement counts once.
    fn granted(policy: Policy) -> Vec<String> {
        let doc = policy.render(&zones()).unwrap();
        let mut lines = Vec::new();
        for statement in doc["Statement"].as_array().unwrap() {
            let statement = statement.as_object().unwrap();
            assert_eq!(statement["Effect"], "Allow", "{policy:?}: {statement:?}");
            for key in ["NotAction", "NotResource", "NotPrincipal", "Principal"] {
                assert!(!statement.contains_key(key), "{policy:?} uses {key}");
            }
            let resource = strings(&statement["Resource"]).join(" ");
            let condition = statement
                .get("Condition")
                .map_or_else(|| "-".to_owned(), Value::to_string);
            for action in strings(&statement["Action"]) {
                lines.push(format!("{action}\t{resource}\t{condition}"));
            }
        }
        lines.sort();
        lines.dedup();
        lines
    }

    /// The table's lines per role, with the zone placeholders filled in like `granted`.
    fn table() -> BTreeMap<String, Vec<String>> {
        let zones = zones();
        let mut by_role: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut rows = ACTIONS_TABLE
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty());
        assert_eq!(rows.next(), Some("role\taction\tresource\tcondition"));
        for row in rows {
            let fields: Vec<&str> = row.split('\t').collect();
            let [role, action, resource, condition] = fields[..] else {
                panic!("not four tab-separated fields: {row:?}");
            };
            let resource = resource
                .replace("${PUBLIC_ZONE_ID}", &zones.public)
                .replace("${PRIVATE_ZONE_ID}", &zones.private)
                .replace("${LOCAL_ZONE_ID}", &zones.local);
            by_role
                .entry(role.to_owned())
                .or_default()
                .push(format!("{action}\t{resource}\t{condition}"));
        }
        for (role, lines) in &mut by_role {
            let actions: Vec<&str> = lines
                .iter()
                .map(|l| l.split('\t').next().unwrap())
                .collect();
            let mut unique = actions.clone();
            unique.sort_unstable();
            unique.dedup();
            assert_eq!(unique.len(), actions.len(), "{role} lists an action twice");
            lines.sort();
        }
        by_role
    }

    fn scope(policy: Policy, action: &str) -> Option<(String, String)> {
        granted(policy).into_iter().find_map(|line| {
            let mut fields = line.split('\t');
            (fields.next() == Some(action)).then(|| {
                (
                    fields.next().unwrap().to_owned(),
                    fields.next().unwrap().to_owned(),
                )
            })
        })
    }

    fn assert_granted_everywhere(policy: Policy, actions: &[&str]) {
        for action in actions {
            assert_eq!(
                scope(policy, action),
                Some(("*".to_owned(), "-".to_owned())),
                "{policy:?} should allow {action} on every resource"
            );
        }
    }

    #[test]
    fn the_actions_table_lists_exactly_what_each_document_allows() {
        let mut table = table();
        for policy in Policy::ALL {
            let listed = table.remove(table_name(policy)).unwrap_or_default();
            assert_eq!(
                granted(policy),
                listed,
                "{policy:?} differs from actions.tsv"
            );
        }
        assert!(
            table.is_empty(),
            "actions.tsv has unknown roles: {:?}",
            table.keys()
        );
    }

    #[test]
    fn the_actions_table_names_the_hypershift_commit_it_matches() {
        let header: String = ACTIONS_TABLE
            .lines()
            .take_while(|l| l.starts_with('#'))
            .collect();
        assert!(header.contains("openshift/hypershift commit"), "{header}");
        assert!(
            header
                .split_whitespace()
                .any(|word| word.len() == 40 && word.chars().all(|c| c.is_ascii_hexdigit())),
            "no commit id in {header}"
        );
    }

    #[test]
    fn control_plane_operator_can_manage_the_endpoint_security_group() {
        assert_granted_everywhere(
            Policy::ControlPlaneOperator,
            &[
                "ec2:CreateSecurityGroup",
                "ec2:AuthorizeSecurityGroupIngress",
                "ec2:RevokeSecurityGroupIngress",
                "ec2:DeleteSecurityGroup",
                "ec2:DescribeSecurityGroups",
                "ec2:DescribeVpcs",
                "ec2:DescribeSubnets",
            ],
        );
    }

    #[test]
    fn cloud_controller_can_manage_target_group_attributes_and_security_groups() {
        assert_granted_everywhere(
            Policy::CloudController,
            &[
                "elasticloadbalancing:DescribeTargetGroupAttributes",
                "elasticloadbalancing:ModifyTargetGroupAttributes",
                "elasticloadbalancing:SetSecurityGroups",
            ],
        );
    }

    #[test]
    fn ebs_csi_driver_can_use_kms_keys_and_grant_only_to_aws_resources() {
        assert_granted_everywhere(
            Policy::EbsCsiDriver,
            &[
                "kms:Decrypt",
                "kms:Encrypt",
                "kms:GenerateDataKey",
                "kms:GenerateDataKeyWithoutPlainText",
                "kms:DescribeKey",
            ],
        );
        for action in ["kms:CreateGrant", "kms:ListGrants", "kms:RevokeGrant"] {
            assert_eq!(
                scope(Policy::EbsCsiDriver, action),
                Some((
                    "*".to_owned(),
                    r#"{"Bool":{"kms:GrantIsForAWSResource":true}}"#.to_owned()
                )),
                "{action}"
            );
        }
    }

    #[test]
    fn node_pool_can_describe_instance_types_and_consume_its_queue() {
        assert_granted_everywhere(
            Policy::NodePool,
            &[
                "ec2:DescribeInstanceTypes",
                "sqs:DeleteMessage",
                "sqs:ReceiveMessage",
            ],
        );
    }

    #[test]
    fn no_policy_changes_records_outside_the_clusters_zones() {
        let zones = zones();
        let own = [&zones.public, &zones.private, &zones.local]
            .map(|id| format!("arn:aws:route53:::hostedzone/{id}"));
        for policy in Policy::ALL {
            if let Some((resource, _)) = scope(policy, "route53:ChangeResourceRecordSets") {
                assert!(
                    resource.split(' ').all(|r| own.iter().any(|o| o == r)),
                    "{policy:?}: {resource}"
                );
            }
        }
    }

    #[test]
    fn zone_ids_cannot_inject_into_the_document() {
        let mut bad = zones();
        bad.local = "Z1\"},{\"Effect\":\"Allow".into();
        assert!(matches!(
            Policy::ControlPlaneOperator.render(&bad),
            Err(PolicyError::InvalidZoneId(_))
        ));
    }
}
