//! What a server lets a client ask of the management cluster, beyond what the input's
//! own checks (`input.rs`) allow: how many node pools, which annotations (never an image
//! override unless the operator of the server allows it), which namespaces (never the
//! cluster's own: `kube-system`, `default`, `openshift-*`, `kube-*`), and which release
//! image registries. Configured per server; checked at intake, before anything is
//! recorded. Pure: the server passes the policy and the start's input.

use serde_json::Value;

use crate::create::TYPE as CREATE;

/// Namespaces a hosted cluster never goes into, whatever the policy says.
const RESERVED_NAMESPACES: [&str; 2] = ["kube-system", "default"];
const RESERVED_NAMESPACE_PREFIXES: [&str; 2] = ["openshift-", "kube-"];

/// The server's limits on what a create may ask for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdmissionPolicy {
    /// Node pools a create may ask for.
    pub max_node_pools: usize,
    /// Annotation keys allowed on the HostedCluster and NodePools: exact keys, or
    /// prefixes ending in `*`. Empty: none.
    pub annotations: Vec<String>,
    /// Whether an allowed annotation may override an image: any whose name speaks of
    /// images — the operators' `*-image` overrides, `image-overrides`, the catalog images
    /// and `control-plane-operator-image-labels` (hypershift's v1beta1
    /// `hostedcluster_types.go`).
    pub image_overrides: bool,
    /// Namespaces a HostedCluster may go into (exact names, or prefixes ending in `*`).
    pub namespaces: Vec<String>,
    /// Release images must start with one of these (`quay.io/openshift-release-dev/`).
    pub release_registries: Vec<String>,
}

impl Default for AdmissionPolicy {
    fn default() -> Self {
        Self {
            max_node_pools: 10,
            annotations: Vec::new(),
            image_overrides: false,
            namespaces: vec!["clusters".to_owned()],
            release_registries: vec!["quay.io/openshift-release-dev/".to_owned()],
        }
    }
}

impl AdmissionPolicy {
    /// Every way `input` of a `workflow_type` start goes beyond the policy (empty: it
    /// does not). Only a create asks for node pools, annotations, a namespace and a
    /// release image; other types pass.
    pub fn check(&self, workflow_type: &str, input: &Value) -> Vec<String> {
        if workflow_type != CREATE {
            return Vec::new();
        }
        let mut problems = Vec::new();
        let pools = input["node_pools"]
            .as_array()
            .map_or(&[][..], Vec::as_slice);
        if pools.len() > self.max_node_pools {
            problems.push(format!(
                "node_pools: {} asked for; this server allows at most {}",
                pools.len(),
                self.max_node_pools
            ));
        }
        self.check_annotations("annotations", &input["annotations"], &mut problems);
        for (index, pool) in pools.iter().enumerate() {
            let at = format!("node_pools[{index}].annotations");
            self.check_annotations(&at, &pool["annotations"], &mut problems);
        }
        let namespace = input["namespace"].as_str().unwrap_or("clusters");
        if reserved_namespace(namespace) {
            problems.push(format!(
                "namespace: {namespace:?} belongs to the management cluster itself"
            ));
        } else if !self
            .namespaces
            .iter()
            .any(|allowed| matches(allowed, namespace))
        {
            problems.push(format!(
                "namespace: {namespace:?} is not one this server allows ({})",
                self.namespaces.join(", ")
            ));
        }
        if let Some(image) = input["release_image"].as_str() {
            if !self
                .release_registries
                .iter()
                .any(|registry| image.starts_with(registry.as_str()))
            {
                problems.push(format!(
                    "release_image: {image:?} is not from a registry this server allows ({})",
                    self.release_registries.join(", ")
                ));
            }
        }
        problems
    }

    fn check_annotations(&self, at: &str, annotations: &Value, problems: &mut Vec<String>) {
        let Some(annotations) = annotations.as_object() else {
            return;
        };
        for key in annotations.keys() {
            if !self.annotations.iter().any(|allowed| matches(allowed, key)) {
                problems.push(format!(
                    "{at}: {key:?} is not an annotation this server allows"
                ));
            } else if overrides_an_image(key) && !self.image_overrides {
                problems.push(format!(
                    "{at}: {key:?} overrides an image, which this server does not allow"
                ));
            }
        }
    }
}

/// Whether an annotation key names an image setting: its name (after the `/`) mentions
/// images.
fn overrides_an_image(key: &str) -> bool {
    let name = key.rsplit_once('/').map_or(key, |(_, name)| name);
    name.contains("image")
}

/// An exact name, or a prefix ending in `*`.
pub(crate) fn matches(pattern: &str, value: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => value.starts_with(prefix),
        None => value == pattern,
    }
}

pub(crate) fn reserved_namespace(namespace: &str) -> bool {
    RESERVED_NAMESPACES.contains(&namespace)
        || RESERVED_NAMESPACE_PREFIXES
            .iter()
            .any(|prefix| namespace.starts_with(prefix))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn create(extra: Value) -> Value {
        let mut input = json!({"namespace": "clusters",
            "release_image": "quay.io/openshift-release-dev/ocp-release:4.17.0-x86_64",
            "node_pools": [{"name": "a"}], "annotations": {}});
        for (key, value) in extra.as_object().unwrap() {
            input[key] = value.clone();
        }
        input
    }

    #[test]
    fn the_default_policy_admits_a_plain_create_and_nothing_more() {
        let policy = AdmissionPolicy::default();
        assert!(policy.check(CREATE, &create(json!({}))).is_empty());
        let pools: Vec<Value> = (0..11).map(|n| json!({"name": format!("p{n}")})).collect();
        let problems = policy.check(
            CREATE,
            &create(json!({
                "node_pools": pools,
                "annotations": {"hypershift.openshift.io/control-plane-operator-image": "evil"},
                "namespace": "openshift-config",
                "release_image": "evil.example.com/ocp:4.17",
            })),
        );
        let text = problems.join("; ");
        for expected in [
            "node_pools: 11",
            "annotation this server allows",
            "belongs to the management cluster",
            "release_image",
        ] {
            assert!(text.contains(expected), "{expected}: {text}");
        }
        assert!(policy
            .check("scale_node_pool", &json!({"anything": 1}))
            .is_empty());
    }

    #[test]
    fn allowed_annotations_still_may_not_override_images_unless_allowed() {
        let mut policy = AdmissionPolicy {
            annotations: vec![
                "hypershift.openshift.io/*".into(),
                "hcpflow.io/emulator-*".into(),
            ],
            namespaces: vec!["clusters".into(), "team-*".into()],
            ..AdmissionPolicy::default()
        };
        let image =
            json!({"annotations": {"hypershift.openshift.io/control-plane-operator-image": "x"}});
        assert!(policy.check(CREATE, &create(image.clone()))[0].contains("overrides an image"));
        // Every image setting of hypershift's v1beta1 annotations, not only `*-image`.
        for key in [
            "hypershift.openshift.io/image-overrides",
            "hypershift.openshift.io/redhat-operators-catalog-image",
            "hypershift.openshift.io/control-plane-operator-image-labels",
        ] {
            let other = json!({"annotations": {key: "x"}});
            assert!(
                policy.check(CREATE, &create(other))[0].contains("overrides an image"),
                "{key}"
            );
        }
        policy.image_overrides = true;
        assert!(policy.check(CREATE, &create(image)).is_empty());
        let pool = json!({"node_pools": [{"name": "a", "annotations": {"hcpflow.io/emulator-stall-at": "1"}}],
                          "namespace": "team-blue"});
        assert!(policy.check(CREATE, &create(pool)).is_empty());
        // Never the management cluster's own namespaces, whatever the patterns say.
        policy.namespaces.push("*".into());
        assert!(!policy
            .check(CREATE, &create(json!({"namespace": "kube-system"})))
            .is_empty());
        assert!(!policy
            .check(CREATE, &create(json!({"namespace": "default"})))
            .is_empty());
    }
}
