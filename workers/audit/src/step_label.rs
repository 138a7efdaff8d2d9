//! How a step is named in audits, progress and timelines.

use serde_json::Value;

/// `aws.create_subnet private us-east-1a`: the type and the input fields that tell
/// steps of one type apart.
pub fn step_label(activity_type: &str, input: &Value) -> String {
    let mut parts = vec![activity_type.to_owned()];
    // Kubernetes objects are told apart by name; AWS steps by role, exposure and zone
    // (their names repeat the infra id).
    let keys: &[&str] = if activity_type.starts_with("kube.") {
        &["name"]
    } else {
        &["role", "exposure", "zone"]
    };
    // Deletes name their object as `{"object": {"name", ...}}`.
    let fields = if input["object"].is_object() {
        &input["object"]
    } else {
        input
    };
    let distinguishing: Vec<String> = keys
        .iter()
        .filter_map(|key| fields[*key].as_str().map(str::to_owned))
        .collect();
    if distinguishing.is_empty() {
        if let Some(name) = input["name"].as_str() {
            parts.push(name.to_owned());
        } else if let Some(state) = input["state"].as_str() {
            parts.push(state.to_owned());
        }
    }
    parts.extend(distinguishing);
    if let Some(replicas) = input["replicas"].as_i64() {
        parts.push(format!("→ {replicas}"));
    }
    parts.join(" ")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn labels_tell_steps_of_one_type_apart() {
        assert_eq!(
            step_label(
                "aws.create_operator_role",
                &json!({"role": "openshift-ingress"})
            ),
            "aws.create_operator_role openshift-ingress"
        );
        assert_eq!(
            step_label(
                "kube.apply_node_pool",
                &json!({"name": "demo-us-east-1a", "zone": "us-east-1a", "replicas": 0})
            ),
            "kube.apply_node_pool demo-us-east-1a → 0"
        );
        assert_eq!(
            step_label(
                "kube.scale_node_pool",
                &json!({"name": "demo-us-east-1a", "replicas": 4})
            ),
            "kube.scale_node_pool demo-us-east-1a → 4"
        );
        assert_eq!(
            step_label(
                "kube.delete_node_pool",
                &json!({"object": {"name": "demo-us-east-1a", "namespace": "clusters"}})
            ),
            "kube.delete_node_pool demo-us-east-1a"
        );
    }
}
