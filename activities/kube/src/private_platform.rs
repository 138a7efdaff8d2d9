//! Is the hypershift-operator installed for the private platform? `hypershift install
//! --private-platform AWS --aws-private-region <r> --aws-private-creds <file>` starts
//! its Deployment `hypershift/operator` with `--private-platform=AWS`, `AWS_REGION=<r>`
//! and `AWS_SHARED_CREDENTIALS_FILE`; without them the operator refuses every
//! PublicAndPrivate or Private HostedCluster (`SupportedHostedCluster=False`) — found
//! here before anything is made instead.

use hcpflow_engine::ActivityFailure;
use hcpflow_hypershift::kube::private_platform::{CheckPrivatePlatform, PrivatePlatform};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Container;
use kube::Api;

use crate::dispatch::KubeActivities;
use crate::error::failure;

pub const OPERATOR_NAMESPACE: &str = "hypershift";
pub const OPERATOR_DEPLOYMENT: &str = "operator";

/// What `hypershift install` should have been given, for the error messages.
fn install_hint(region: &str) -> String {
    format!(
        "install it with hypershift install --private-platform AWS --aws-private-region {region} \
         --aws-private-creds <credentials file>"
    )
}

/// Errors: permanent `PrivatePlatformMissing` naming what the Deployment lacks (or that
/// it is absent), and how to install the operator so it serves private clusters here.
pub async fn check_private_platform(
    kube: &KubeActivities,
    request: &CheckPrivatePlatform,
) -> Result<PrivatePlatform, ActivityFailure> {
    let api: Api<Deployment> = Api::namespaced(kube.client.clone(), OPERATOR_NAMESPACE);
    let what = format!("Deployment {OPERATOR_NAMESPACE}/{OPERATOR_DEPLOYMENT}");
    let missing = |why: String| {
        ActivityFailure::permanent(
            "PrivatePlatformMissing",
            format!(
                "the HyperShift operator cannot serve PublicAndPrivate or Private clusters in {}: {why}; {}",
                request.region,
                install_hint(&request.region)
            ),
        )
    };
    let deployment = api
        .get_opt(OPERATOR_DEPLOYMENT)
        .await
        .map_err(|e| failure(&format!("reading {what}"), e))?
        .ok_or_else(|| {
            missing(format!(
                "{what} does not exist (the operator is not installed)"
            ))
        })?;
    let containers: Vec<Container> = deployment
        .spec
        .template
        .spec
        .map(|pod| pod.containers)
        .unwrap_or_default();
    let operator = containers
        .iter()
        .find(|c| c.name == "operator")
        .or_else(|| containers.first())
        .ok_or_else(|| missing(format!("{what} has no container")))?;
    let args: Vec<&str> = operator
        .command
        .iter()
        .chain(operator.args.iter())
        .flatten()
        .map(String::as_str)
        .collect();
    let private_aws = args.windows(2).any(|w| w == ["--private-platform", "AWS"])
        || args.contains(&"--private-platform=AWS");
    if !private_aws {
        return Err(missing(format!(
            "{what} was started without --private-platform=AWS"
        )));
    }
    let env = |name: &str| {
        operator
            .env
            .iter()
            .flatten()
            .find(|e| e.name == name)
            .and_then(|e| e.value.clone())
    };
    match env("AWS_REGION") {
        None => {
            return Err(missing(format!(
                "{what} has no AWS_REGION (the operator reports \"AWS_REGION environment variable is not set for the operator\")"
            )))
        }
        Some(region) if region != request.region => {
            return Err(missing(format!(
                "the operator only supports private clusters in region {region}"
            )))
        }
        Some(_) => {}
    }
    if env("AWS_SHARED_CREDENTIALS_FILE").is_none() {
        return Err(missing(format!(
            "{what} has no AWS_SHARED_CREDENTIALS_FILE (the credentials it makes endpoint services with)"
        )));
    }
    Ok(PrivatePlatform {
        region: request.region.clone(),
    })
}
