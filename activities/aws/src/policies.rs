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
    use super::*;

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
