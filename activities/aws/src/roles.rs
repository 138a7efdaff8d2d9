//! The operator roles of a hosted cluster and their web-identity trust.

use serde_json::{json, Value};

use crate::policies::Policy;

/// One operator role: `<infra-id>-<suffix>`, assumable by these service accounts
/// through the cluster's OIDC provider, with this inline policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OperatorRole {
    pub suffix: &'static str,
    pub service_accounts: &'static [&'static str],
    pub policy: Policy,
    /// The field of the HostedCluster's `spec.platform.aws.rolesRef` that takes its ARN.
    pub roles_ref: &'static str,
}

/// The seven operator roles, in the order they are created.
pub const OPERATOR_ROLES: [OperatorRole; 7] = [
    OperatorRole {
        suffix: "openshift-ingress",
        service_accounts: &["system:serviceaccount:openshift-ingress-operator:ingress-operator"],
        policy: Policy::Ingress,
        roles_ref: "ingressARN",
    },
    OperatorRole {
        suffix: "openshift-image-registry",
        service_accounts: &[
            "system:serviceaccount:openshift-image-registry:cluster-image-registry-operator",
            "system:serviceaccount:openshift-image-registry:registry",
        ],
        policy: Policy::ImageRegistry,
        roles_ref: "imageRegistryARN",
    },
    OperatorRole {
        suffix: "aws-ebs-csi-driver-controller",
        service_accounts: &["system:serviceaccount:openshift-cluster-csi-drivers:aws-ebs-csi-driver-controller-sa"],
        policy: Policy::EbsCsiDriver,
        roles_ref: "storageARN",
    },
    OperatorRole {
        suffix: "cloud-controller",
        service_accounts: &["system:serviceaccount:kube-system:kube-controller-manager"],
        policy: Policy::CloudController,
        roles_ref: "kubeCloudControllerARN",
    },
    OperatorRole {
        suffix: "node-pool",
        service_accounts: &["system:serviceaccount:kube-system:capa-controller-manager"],
        policy: Policy::NodePool,
        roles_ref: "nodePoolManagementARN",
    },
    OperatorRole {
        suffix: "control-plane-operator",
        service_accounts: &["system:serviceaccount:kube-system:control-plane-operator"],
        policy: Policy::ControlPlaneOperator,
        roles_ref: "controlPlaneOperatorARN",
    },
    OperatorRole {
        suffix: "cloud-network-config-controller",
        service_accounts: &[
            "system:serviceaccount:openshift-cloud-network-config-controller:cloud-network-config-controller",
        ],
        policy: Policy::CloudNetworkConfig,
        roles_ref: "networkARN",
    },
];

/// The audience the cluster's service-account tokens for AWS carry.
pub const TOKEN_AUDIENCE: &str = "openshift";

impl OperatorRole {
    pub fn name(&self, infra_id: &str) -> String {
        format!("{infra_id}-{}", self.suffix)
    }

    /// The trust policy: only these service accounts, with tokens from this cluster's
    /// issuer (`issuer` is the provider URL without `https://`), may assume the role.
    /// Unlike the `hypershift` CLI it also pins the token audience, so a token minted
    /// for another audience by the same issuer cannot be used.
    pub fn trust_policy(&self, provider_arn: &str, issuer: &str) -> Value {
        json!({
            "Version": "2012-10-17",
            "Statement": [{
                "Effect": "Allow",
                "Principal": {"Federated": provider_arn},
                "Action": "sts:AssumeRoleWithWebIdentity",
                "Condition": {"StringEquals": {
                    format!("{issuer}:sub"): self.service_accounts,
                    format!("{issuer}:aud"): TOKEN_AUDIENCE,
                }},
            }],
        })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_workflows_table_of_roles_matches_this_one() {
        let here: Vec<(&str, &str)> = super::OPERATOR_ROLES
            .iter()
            .map(|role| (role.suffix, role.roles_ref))
            .collect();
        assert_eq!(here, hcpflow_hypershift::aws::iam::OPERATOR_ROLES.to_vec());
    }

    use super::*;

    #[test]
    fn seven_roles_with_distinct_names_and_fields() {
        let mut suffixes: Vec<&str> = OPERATOR_ROLES.iter().map(|r| r.suffix).collect();
        suffixes.sort_unstable();
        suffixes.dedup();
        assert_eq!(suffixes.len(), 7);
        assert_eq!(
            OPERATOR_ROLES[5].name("demo-x7k2p"),
            "demo-x7k2p-control-plane-operator"
        );
        assert!(
            OPERATOR_ROLES.iter().all(|r| r.name("a").len() <= 64),
            "IAM role names are at most 64 characters"
        );
    }

    #[test]
    fn trust_names_the_provider_subjects_and_audience() {
        let issuer = "hcpflow-oidc.s3.us-east-1.amazonaws.com/demo-x7k2p";
        let arn = format!("arn:aws:iam::123456789012:oidc-provider/{issuer}");
        let trust = OPERATOR_ROLES[1].trust_policy(&arn, issuer);
        let statement = &trust["Statement"][0];
        assert_eq!(statement["Principal"]["Federated"], arn);
        let condition = &statement["Condition"]["StringEquals"];
        assert_eq!(
            condition[format!("{issuer}:sub")].as_array().unwrap().len(),
            2
        );
        assert_eq!(condition[format!("{issuer}:aud")], "openshift");
    }
}
