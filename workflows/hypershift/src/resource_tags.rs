//! The user's AWS resource tags (a create's `resource_tags`): put on every AWS object
//! hcpflow makes and handed to the operators in `spec.platform.aws.resourceTags`, as
//! `hypershift create cluster aws --additional-tags` does. The operators put them on
//! what they make (endpoints, security groups, instances, volumes).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The HostedCluster API takes at most 25 `resourceTags`; one is the owned tag.
pub const MAX_USER_TAGS: usize = 24;
const MAX_KEY: usize = 128;
const MAX_VALUE: usize = 256;
/// Keys hcpflow and the operators set themselves: a user tag must not override them.
const RESERVED_KEYS: [&str; 2] = [crate::naming::NAME_TAG, crate::naming::INFRA_ID_TAG];
const RESERVED_PREFIXES: [&str; 3] = ["kubernetes.io/cluster/", "hcpflow.io/", "aws:"];

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ResourceTags(pub BTreeMap<String, String>);

impl ResourceTags {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0
            .iter()
            .map(|(key, value)| (key.as_str(), value.as_str()))
    }

    /// What the HostedCluster CRD and AWS refuse, and keys that would override the tags
    /// lookups and the destroy depend on; each problem names the tag.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.0.len() > MAX_USER_TAGS {
            problems.push(format!(
                "resource_tags: {} given; at most {MAX_USER_TAGS} (the HostedCluster takes 25, one is the cluster's owned tag)",
                self.0.len()
            ));
        }
        for (key, value) in &self.0 {
            if !is_tag_text(key, MAX_KEY) {
                problems.push(format!(
                    "resource_tags: key {key:?} must be 1 to {MAX_KEY} letters, digits or _ . : / = + - @"
                ));
            }
            if !is_tag_text(value, MAX_VALUE) {
                problems.push(format!(
                    "resource_tags.{key}: value {value:?} must be 1 to {MAX_VALUE} letters, digits or _ . : / = + - @"
                ));
            }
            let lower = key.to_ascii_lowercase();
            if RESERVED_KEYS.contains(&key.as_str())
                || RESERVED_PREFIXES
                    .iter()
                    .any(|prefix| lower.starts_with(prefix))
            {
                problems.push(format!(
                    "resource_tags: key {key:?} is set by hcpflow, HyperShift or AWS and cannot be given"
                ));
            }
        }
        problems
    }
}

/// The CRD's `^[0-9A-Za-z_.:/=+@-]+$` with its length limit (in characters).
fn is_tag_text(text: &str, max: usize) -> bool {
    !text.is_empty()
        && text.chars().count() <= max
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.:/=+@-".contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(pairs: &[(&str, &str)]) -> ResourceTags {
        ResourceTags(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        )
    }

    #[test]
    fn accepts_what_the_crd_accepts() {
        let given = tags(&[("team", "platform"), ("cost-center", "a/b=c+d@e:f_g.h")]);
        assert!(given.problems().is_empty(), "{:?}", given.problems());
    }

    #[test]
    fn refuses_characters_lengths_and_counts_the_crd_refuses() {
        let long_key = "k".repeat(129);
        let long_value = "v".repeat(257);
        let given = tags(&[
            ("a b", "ok"),
            ("empty", ""),
            (&long_key, "ok"),
            ("long", &long_value),
        ]);
        let problems = given.problems();
        assert_eq!(problems.len(), 4, "{problems:?}");
        assert!(problems[0].contains("\"a b\""));
        let many = ResourceTags((0..25).map(|i| (format!("k{i}"), "v".into())).collect());
        assert!(many.problems()[0].contains("25 given; at most 24"));
    }

    #[test]
    fn refuses_keys_hcpflow_hypershift_or_aws_set() {
        for key in [
            "Name",
            "hypershift.openshift.io/infra-id",
            "kubernetes.io/cluster/other",
            "hcpflow.io/idempotency-key",
            "AWS:createdBy",
        ] {
            let problems = tags(&[(key, "x")]).problems();
            assert_eq!(problems.len(), 1, "{key}: {problems:?}");
            assert!(problems[0].contains("cannot be given"), "{problems:?}");
        }
    }

    #[test]
    fn serializes_as_a_plain_map() {
        let given = tags(&[("team", "platform")]);
        assert_eq!(
            serde_json::to_value(&given).unwrap(),
            serde_json::json!({"team": "platform"})
        );
    }
}
