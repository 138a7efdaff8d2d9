//! A role with its trust policy and one inline policy, and the delete that takes
//! everything attached to a role off it first.

use hcpflow_engine::ActivityFailure;
use serde_json::Value;

use crate::clients::AwsClients;
use crate::error::from_sdk;
use crate::iam::{policy_document, Owner};
use crate::lookup::{deleted, unless_not_found};
use crate::scope::Scope;

pub use hcpflow_hypershift::aws::iam::Role;

pub const KIND: &str = "iam:role";

/// Creates the role, or finds it, and makes its trust policy `trust` (updating one that
/// differs: a changed issuer must not leave a stale trust, as the `hypershift` CLI
/// does); then writes the inline policy `policy_name` (an overwrite).
pub(crate) async fn ensure_role(
    aws: &AwsClients,
    scope: &Scope<'_>,
    owner: Owner<'_>,
    name: &str,
    trust: &Value,
    policy_name: &str,
    policy: &Value,
) -> Result<Role, ActivityFailure> {
    let arn = match get_role(aws, name).await? {
        Some((arn, current_trust)) => {
            if current_trust.as_ref() != Some(trust) {
                aws.iam
                    .update_assume_role_policy()
                    .role_name(name)
                    .policy_document(trust.to_string())
                    .send()
                    .await
                    .map_err(from_sdk)?;
            }
            arn
        }
        None => {
            let created = aws
                .iam
                .create_role()
                .role_name(name)
                .assume_role_policy_document(trust.to_string())
                .set_tags(Some(crate::iam::tags(owner, name, scope.idempotency_key)))
                .send()
                .await;
            match created {
                Ok(created) => created
                    .role()
                    .map(|role| role.arn().to_owned())
                    .ok_or_else(|| {
                        ActivityFailure::retryable("MissingId", "CreateRole returned no role")
                    })?,
                Err(error) => return Err(crate::iam::create_failed(from_sdk(error))),
            }
        }
    };
    scope.log.created(scope.resource(KIND, &arn));
    aws.iam
        .put_role_policy()
        .role_name(name)
        .policy_name(policy_name)
        .policy_document(policy.to_string())
        .send()
        .await
        // Right after CreateRole the role may not be visible yet.
        .map_err(|error| from_sdk(error).into_failure(true))?;
    Ok(Role {
        name: name.to_owned(),
        arn,
    })
}

/// The role's ARN and trust policy, or `None` when there is no such role.
async fn get_role(
    aws: &AwsClients,
    name: &str,
) -> Result<Option<(String, Option<Value>)>, ActivityFailure> {
    let found = unless_not_found(aws.iam.get_role().role_name(name).send().await)?;
    Ok(found.and_then(|found| {
        found.role().map(|role| {
            (
                role.arn().to_owned(),
                role.assume_role_policy_document()
                    .and_then(policy_document::decode),
            )
        })
    }))
}

/// Detaches managed policies (first: listing them right after an inline delete can
/// wrongly come back empty), deletes inline policies, takes the role out of instance
/// profiles, then deletes it. A role already gone is done; `DeleteConflict` (IAM still
/// seeing something attached) is retried.
pub async fn delete_role(
    aws: &AwsClients,
    scope: &Scope<'_>,
    role: &Role,
) -> Result<(), ActivityFailure> {
    let name = role.name.as_str();
    let Some(attached) = unless_not_found(
        aws.iam
            .list_attached_role_policies()
            .role_name(name)
            .send()
            .await,
    )?
    else {
        return Ok(());
    };
    for policy in attached.attached_policies() {
        if let Some(arn) = policy.policy_arn() {
            let result = aws
                .iam
                .detach_role_policy()
                .role_name(name)
                .policy_arn(arn)
                .send()
                .await;
            unless_not_found(result)?;
        }
    }
    if let Some(inline) =
        unless_not_found(aws.iam.list_role_policies().role_name(name).send().await)?
    {
        for policy in inline.policy_names() {
            let result = aws
                .iam
                .delete_role_policy()
                .role_name(name)
                .policy_name(policy)
                .send()
                .await;
            unless_not_found(result)?;
        }
    }
    if let Some(profiles) = unless_not_found(
        aws.iam
            .list_instance_profiles_for_role()
            .role_name(name)
            .send()
            .await,
    )? {
        for profile in profiles.instance_profiles() {
            let result = aws
                .iam
                .remove_role_from_instance_profile()
                .instance_profile_name(profile.instance_profile_name())
                .role_name(name)
                .send()
                .await;
            unless_not_found(result)?;
        }
    }
    let result = aws.iam.delete_role().role_name(name).send().await;
    deleted(scope, KIND, &role.arn, result)
}
