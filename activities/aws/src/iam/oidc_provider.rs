//! The cluster's IAM OIDC provider (hypershift-aws.md §2.1, §2.6 step 1).
//!
//! Found by its exact ARN path — the `hypershift` CLI matches a substring, so `<I>` also
//! finds `<I>-2`, and deletes and re-creates; we adopt ours and never touch another's.

use hcpflow_engine::ActivityFailure;

use crate::clients::AwsClients;
use crate::error::from_sdk;
use crate::iam::Owner;
use crate::lookup::{deleted, find_or_create};
use crate::scope::Scope;

pub use hcpflow_hypershift::aws::iam::{CreateOidcProvider, OidcProvider};

pub const KIND: &str = "iam:oidc-provider";

/// The audiences of the cluster's tokens: OpenShift's own, and STS's.
pub const CLIENT_IDS: [&str; 2] = ["openshift", "sts.amazonaws.com"];

/// The root CA thumbprint of S3's certificates. AWS ignores it for S3-hosted issuers
/// but refuses a create without one.
pub const THUMBPRINT: &str = "A9D53002E97E00E043244F3D170D6F4C414104FD";

/// The issuer URL without its scheme, as IAM names the provider.
pub fn issuer_host_path(issuer_url: &str) -> &str {
    issuer_url
        .trim_start_matches("https://")
        .trim_end_matches('/')
}

/// Creates the provider, or finds the one whose ARN names exactly this issuer.
pub async fn create_oidc_provider(
    aws: &AwsClients,
    scope: &Scope<'_>,
    request: &CreateOidcProvider,
) -> Result<OidcProvider, ActivityFailure> {
    let issuer = issuer_host_path(&request.issuer_url).to_owned();
    let arn = find_or_create(
        scope,
        KIND,
        || find(aws, &issuer),
        || async {
            let created = aws
                .iam
                .create_open_id_connect_provider()
                .url(&request.issuer_url)
                .set_client_id_list(Some(CLIENT_IDS.iter().map(|id| (*id).to_owned()).collect()))
                .thumbprint_list(THUMBPRINT)
                .set_tags(Some(crate::iam::tags(
                    Owner {
                        infra_id: &request.infra_id,
                        resource_tags: &request.resource_tags,
                    },
                    &issuer,
                    scope.idempotency_key,
                )))
                .send()
                .await;
            match created {
                Ok(created) => crate::lookup::created_id(
                    created.open_id_connect_provider_arn(),
                    "CreateOpenIDConnectProvider",
                ),
                Err(error) => {
                    let error = from_sdk(error);
                    if error.code == "EntityAlreadyExists" {
                        if let Some(arn) = find(aws, &issuer).await? {
                            return Ok(arn);
                        }
                    }
                    Err(error.into())
                }
            }
        },
    )
    .await?;
    Ok(OidcProvider { arn, issuer })
}

/// The provider whose ARN ends in exactly `oidc-provider/<issuer>`.
async fn find(aws: &AwsClients, issuer: &str) -> Result<Option<String>, ActivityFailure> {
    let listed = aws
        .iam
        .list_open_id_connect_providers()
        .send()
        .await
        .map_err(from_sdk)?;
    Ok(listed
        .open_id_connect_provider_list()
        .iter()
        .filter_map(|provider| provider.arn())
        .find(|arn| provider_path(arn) == Some(issuer))
        .map(str::to_owned))
}

/// The issuer part of a provider ARN.
pub fn provider_path(arn: &str) -> Option<&str> {
    arn.split_once(":oidc-provider/").map(|(_, path)| path)
}

/// Deletes the provider; one already gone is done. Deleted last among the IAM objects:
/// in-cluster cleanup needs web identity until then.
pub async fn delete_oidc_provider(
    aws: &AwsClients,
    scope: &Scope<'_>,
    provider: &OidcProvider,
) -> Result<(), ActivityFailure> {
    let result = aws
        .iam
        .delete_open_id_connect_provider()
        .open_id_connect_provider_arn(&provider.arn)
        .send()
        .await;
    deleted(scope, KIND, &provider.arn, result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_provider_is_matched_by_its_whole_path() {
        let arn = "arn:aws:iam::123456789012:oidc-provider/b.s3.us-east-1.amazonaws.com/demo-x";
        assert_eq!(
            provider_path(arn),
            Some("b.s3.us-east-1.amazonaws.com/demo-x")
        );
        assert_ne!(
            provider_path(arn),
            Some("b.s3.us-east-1.amazonaws.com/demo")
        );
        assert_eq!(
            issuer_host_path("https://b.s3.us-east-1.amazonaws.com/demo-x"),
            "b.s3.us-east-1.amazonaws.com/demo-x"
        );
    }
}
