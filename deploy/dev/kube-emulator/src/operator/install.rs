//! The hypershift-operator as `hypershift install` puts it on the management cluster
//! (cmd/install/assets/hypershift_operator.go: `HyperShiftOperatorDeployment`), and the
//! check it makes of every HostedCluster against that installation
//! (hypershift-operator/controllers/hostedcluster/hostedcluster_controller.go:
//! `validateHostedClusterSupport`, behind the `SupportedHostedCluster` condition).
//!
//! With a private platform (`--private-platform AWS --aws-private-region <r>
//! --aws-private-creds <file>`), the operator's container gets `--private-platform=AWS`,
//! `AWS_REGION=<r>`, `AWS_SHARED_CREDENTIALS_FILE=/etc/provider/credentials` and the
//! Secret `hypershift-operator-aws-credentials` mounted at `/etc/provider`; without one,
//! `--private-platform=None` and no AWS environment. The check reads the environment of
//! the Deployment in the store, as the real operator reads its own: an operator without
//! `AWS_REGION` refuses every cluster that is not Public, and one with it refuses those
//! of another region.

use base64::Engine;
use serde_json::{json, Value};

use crate::resources::{DEPLOYMENTS, NAMESPACES, SECRETS};
use crate::store::{Part, Store};

pub const NAMESPACE: &str = "hypershift";
pub const DEPLOYMENT: &str = "operator";
pub const CONTAINER: &str = "operator";
/// `awsCredsSecretName`, with the key `--aws-private-secret-key` defaults to.
pub const CREDENTIALS_SECRET: &str = "hypershift-operator-aws-credentials";
pub const CREDENTIALS_KEY: &str = "credentials";
pub const CREDENTIALS_FILE: &str = "/etc/provider/credentials";
const IMAGE: &str = "quay.io/hypershift/hypershift-operator:latest";

fn args(private_platform: &str) -> Vec<String> {
    [
        "run",
        "--namespace=$(MY_NAMESPACE)",
        "--pod-name=$(MY_NAME)",
        "--metrics-addr=:9000",
        "--enable-dedicated-request-serving-isolation=false",
        "--enable-ocp-cluster-monitoring=false",
        "--enable-ci-debug-output=false",
    ]
    .iter()
    .map(|arg| (*arg).to_owned())
    .chain([format!("--private-platform={private_platform}")])
    .collect()
}

/// The Deployment `hypershift install` writes, with or without the AWS private platform.
fn deployment(private_region: Option<&str>) -> Value {
    let mut env = vec![
        json!({"name": "MY_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}),
        json!({"name": "MY_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}),
    ];
    let mut mounts = Vec::new();
    let mut volumes = Vec::new();
    let platform = match private_region {
        Some(region) => {
            env.extend([
                json!({"name": "AWS_SHARED_CREDENTIALS_FILE", "value": CREDENTIALS_FILE}),
                json!({"name": "AWS_REGION", "value": region}),
                json!({"name": "AWS_SDK_LOAD_CONFIG", "value": "1"}),
            ]);
            mounts.push(json!({"name": "credentials", "mountPath": "/etc/provider"}));
            volumes
                .push(json!({"name": "credentials", "secret": {"secretName": CREDENTIALS_SECRET}}));
            "AWS"
        }
        None => "None",
    };
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": DEPLOYMENT, "namespace": NAMESPACE,
                     "labels": {"app": DEPLOYMENT, "hypershift.openshift.io/operator-component": DEPLOYMENT}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"name": DEPLOYMENT}},
            "template": {
                "metadata": {"labels": {"name": DEPLOYMENT, "app": DEPLOYMENT,
                                        "hypershift.openshift.io/operator-component": DEPLOYMENT}},
                "spec": {
                    "serviceAccountName": DEPLOYMENT,
                    "containers": [{
                        "name": CONTAINER, "image": IMAGE,
                        "command": ["/usr/bin/hypershift-operator"],
                        "args": args(platform), "env": env, "volumeMounts": mounts,
                    }],
                    "volumes": volumes,
                },
            },
        },
    })
}

/// A shared credentials file for the management account (moto takes any key).
fn credentials_file() -> String {
    "[default]\naws_access_key_id = testing\naws_secret_access_key = testing\n".to_owned()
}

/// Ensures the `hypershift` namespace and the operator's Deployment as installed with
/// `private_region` (`None`: no private platform); with a private platform, also the
/// credentials Secret. A Deployment of an earlier start is brought to this one's spec.
pub fn ensure(store: &mut Store, private_region: Option<&str>) {
    if store.get(&NAMESPACES, None, NAMESPACE).is_err() {
        let _ = store.create(&NAMESPACES, None, json!({"metadata": {"name": NAMESPACE}}));
    }
    if private_region.is_some()
        && store
            .get(&SECRETS, Some(NAMESPACE), CREDENTIALS_SECRET)
            .is_err()
    {
        let data = base64::engine::general_purpose::STANDARD.encode(credentials_file());
        let _ = store.create(
            &SECRETS,
            Some(NAMESPACE),
            json!({"metadata": {"name": CREDENTIALS_SECRET, "namespace": NAMESPACE},
                   "type": "Opaque", "data": {CREDENTIALS_KEY: data}}),
        );
    }
    let desired = deployment(private_region);
    let written = match store.get(&DEPLOYMENTS, Some(NAMESPACE), DEPLOYMENT) {
        Ok(current) if current["spec"] == desired["spec"] => Ok(current),
        Ok(current) => {
            let mut next = current.clone();
            next["spec"] = desired["spec"].clone();
            if let Some(metadata) = next["metadata"].as_object_mut() {
                metadata.remove("resourceVersion");
            }
            store.update(&DEPLOYMENTS, Some(NAMESPACE), DEPLOYMENT, next, Part::Main)
        }
        Err(_) => store.create(&DEPLOYMENTS, Some(NAMESPACE), desired),
    };
    // The operator runs: one ready replica.
    if let Ok(mut deployment) = written {
        let generation = deployment
            .pointer("/metadata/generation")
            .cloned()
            .unwrap_or(json!(1));
        let status = json!({
            "observedGeneration": generation, "replicas": 1, "updatedReplicas": 1,
            "readyReplicas": 1, "availableReplicas": 1,
            "conditions": [{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
                            "message": "Deployment has minimum availability."}],
        });
        if deployment.get("status") != Some(&status) {
            deployment["status"] = status;
            let _ = store.update(
                &DEPLOYMENTS,
                Some(NAMESPACE),
                DEPLOYMENT,
                deployment,
                Part::Status,
            );
        }
    }
}

/// The value of `name` in the operator container's environment, if it is set.
fn operator_env(store: &Store, name: &str) -> Option<String> {
    let deployment = store.get(&DEPLOYMENTS, Some(NAMESPACE), DEPLOYMENT).ok()?;
    deployment
        .pointer("/spec/template/spec/containers")?
        .as_array()?
        .iter()
        .find(|c| c["name"] == CONTAINER)?
        .get("env")?
        .as_array()?
        .iter()
        .find(|e| e["name"] == name)?
        .get("value")?
        .as_str()
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
}

/// `validateHostedClusterSupport`: `Err` with the operator's message when this
/// installation does not support the HostedCluster (`SupportedHostedCluster=False`,
/// reason `UnsupportedHostedCluster`).
pub(super) fn validate_support(store: &Store, hosted_cluster: &Value) -> Result<(), String> {
    if hosted_cluster
        .pointer("/spec/platform/type")
        .and_then(Value::as_str)
        != Some("AWS")
    {
        return Ok(());
    }
    let Some(aws) = hosted_cluster.pointer("/spec/platform/aws") else {
        return Ok(());
    };
    if aws.get("endpointAccess").and_then(Value::as_str) == Some("Public") {
        return Ok(());
    }
    let Some(region) = operator_env(store, "AWS_REGION") else {
        return Err("AWS_REGION environment variable is not set for the operator".into());
    };
    if operator_env(store, "AWS_SHARED_CREDENTIALS_FILE").is_none() {
        return Err(
            "AWS_SHARED_CREDENTIALS_FILE environment variable is not set for the operator".into(),
        );
    }
    if aws.get("region").and_then(Value::as_str) != Some(region.as_str()) {
        return Err(format!(
            "operator only supports private clusters in region {region}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(access: &str, region: &str) -> Value {
        json!({"spec": {"platform": {"type": "AWS",
                                     "aws": {"endpointAccess": access, "region": region}}}})
    }

    #[test]
    fn without_a_private_platform_only_public_clusters_are_supported() {
        let mut store = Store::new();
        store.bootstrap();
        ensure(&mut store, None);
        assert_eq!(
            validate_support(&store, &cluster("Public", "eu-west-1")),
            Ok(())
        );
        assert_eq!(
            validate_support(&store, &cluster("PublicAndPrivate", "us-east-1")),
            Err("AWS_REGION environment variable is not set for the operator".into())
        );
        let deployment = store
            .get(&DEPLOYMENTS, Some(NAMESPACE), DEPLOYMENT)
            .unwrap();
        let args = &deployment["spec"]["template"]["spec"]["containers"][0]["args"];
        assert!(args
            .as_array()
            .unwrap()
            .contains(&json!("--private-platform=None")));
        assert!(store
            .get(&SECRETS, Some(NAMESPACE), CREDENTIALS_SECRET)
            .is_err());
    }

    #[test]
    fn a_private_platform_supports_private_clusters_of_its_region_only() {
        let mut store = Store::new();
        store.bootstrap();
        ensure(&mut store, None);
        ensure(&mut store, Some("us-east-1"));
        assert_eq!(
            validate_support(&store, &cluster("Private", "us-east-1")),
            Ok(())
        );
        assert_eq!(
            validate_support(&store, &cluster("PublicAndPrivate", "us-west-2")),
            Err("operator only supports private clusters in region us-east-1".into())
        );
        let deployment = store
            .get(&DEPLOYMENTS, Some(NAMESPACE), DEPLOYMENT)
            .unwrap();
        let container = &deployment["spec"]["template"]["spec"]["containers"][0];
        assert!(container["args"]
            .as_array()
            .unwrap()
            .contains(&json!("--private-platform=AWS")));
        assert_eq!(deployment["status"]["readyReplicas"], 1);
        assert!(store
            .get(&SECRETS, Some(NAMESPACE), CREDENTIALS_SECRET)
            .is_ok());
    }
}
