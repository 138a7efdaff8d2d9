//! The worker nodes' role, inline policy and instance profile (hypershift-aws.md §2.4):
//! `<infra-id>-worker-role`, `<infra-id>-worker-policy`, `<infra-id>-worker`.

use hcpflow_engine::ActivityFailure;
use serde_json::json;

use crate::clients::AwsClients;
use crate::error::from_sdk;
use crate::iam::role::{delete_role, ensure_role};
use crate::iam::Owner;
use crate::lookup::{deleted, unless_not_found};
use crate::policies::{Policy, ZoneIds};
use crate::scope::Scope;
use hcpflow_hypershift::aws::iam::Role;

pub use hcpflow_hypershift::aws::iam::{CreateWorkerProfile, WorkerProfile};

pub const PROFILE_KIND: &str = "iam:instance-profile";

pub fn role_name(infra_id: &str) -> String {
    format!("{infra_id}-worker-role")
}

pub fn policy_name(infra_id: &str) -> String {
    format!("{infra_id}-worker-policy")
}

pub fn instance_profile_name(infra_id: &str) -> String {
    format!("{infra_id}-worker")
}

/// Ensures the role (EC2 may assume it), its policy, the profile, and the role in it.
pub async fn create_worker_profile(
    aws: &AwsClients,
    scope: &Scope<'_>,
    request: &CreateWorkerProfile,
) -> Result<WorkerProfile, ActivityFailure> {
    let infra_id = request.infra_id.as_str();
    let trust = json!({
        "Version": "2012-10-17",
        "Statement": [{
            "Effect": "Allow",
            "Principal": {"Service": "ec2.amazonaws.com"},
            "Action": "sts:AssumeRole",
        }],
    });
    // The worker policy names no zone; any valid ids render it.
    let unused = ZoneIds {
        public: "Z0".into(),
        private: "Z0".into(),
        local: "Z0".into(),
    };
    let policy = Policy::Worker
        .render(&unused)
        .map_err(|e| ActivityFailure::permanent("InvalidPolicy", e.to_string()))?;
    let owner = Owner {
        infra_id,
        resource_tags: &request.resource_tags,
    };
    let role = ensure_role(
        aws,
        scope,
        owner,
        &role_name(infra_id),
        &trust,
        &policy_name(infra_id),
        &policy,
    )
    .await?;
    let name = instance_profile_name(infra_id);
    match ensure_profile(aws, scope, owner, &name, &role).await {
        Ok(arn) => Ok(WorkerProfile {
            role,
            instance_profile_name: name,
            instance_profile_arn: arn,
        }),
        // No compensation is registered for a create that failed: what this activity
        // made (the role, perhaps the profile) goes now, or it would be left behind. A
        // retryable failure keeps it for the next attempt, which finds it by name.
        Err(failure) if !failure.retryable => {
            let arn = String::new();
            let partial = WorkerProfile {
                role,
                instance_profile_name: name,
                instance_profile_arn: arn,
            };
            delete_worker_profile(aws, scope, &partial).await?;
            Err(failure)
        }
        Err(failure) => Err(failure),
    }
}

/// The instance profile holding `role`, made if absent; returns its ARN.
async fn ensure_profile(
    aws: &AwsClients,
    scope: &Scope<'_>,
    owner: Owner<'_>,
    name: &str,
    role: &Role,
) -> Result<String, ActivityFailure> {
    let name = name.to_owned();
    let existing = unless_not_found(
        aws.iam
            .get_instance_profile()
            .instance_profile_name(&name)
            .send()
            .await,
    )?;
    let (arn, roles) = match existing.as_ref().and_then(|found| found.instance_profile()) {
        Some(profile) => (
            profile.arn().to_owned(),
            profile
                .roles()
                .iter()
                .map(|role| role.role_name().to_owned())
                .collect(),
        ),
        None => {
            let created = aws
                .iam
                .create_instance_profile()
                .instance_profile_name(&name)
                .set_tags(Some(crate::iam::tags(owner, &name, scope.idempotency_key)))
                .send()
                .await;
            match created {
                Ok(created) => (
                    created
                        .instance_profile()
                        .map(|profile| profile.arn().to_owned())
                        .ok_or_else(|| {
                            ActivityFailure::retryable(
                                "MissingId",
                                "CreateInstanceProfile returned no profile",
                            )
                        })?,
                    Vec::new(),
                ),
                Err(error) => return Err(crate::iam::create_failed(from_sdk(error))),
            }
        }
    };
    scope.log.created(scope.resource(PROFILE_KIND, &arn));
    if !roles.contains(&role.name) {
        let added = aws
            .iam
            .add_role_to_instance_profile()
            .instance_profile_name(&name)
            .role_name(&role.name)
            .send()
            .await;
        if let Err(error) = added {
            let error = from_sdk(error);
            // A profile holds one role: LimitExceeded means ours got in meanwhile, or
            // another is there (permanent; the message says which).
            if error.code != "LimitExceeded" || !profile_holds(aws, &name, &role.name).await? {
                return Err(error.into_failure(true));
            }
        }
    }
    Ok(arn)
}

async fn profile_holds(
    aws: &AwsClients,
    profile: &str,
    role: &str,
) -> Result<bool, ActivityFailure> {
    let found = unless_not_found(
        aws.iam
            .get_instance_profile()
            .instance_profile_name(profile)
            .send()
            .await,
    )?;
    Ok(found
        .as_ref()
        .and_then(|found| found.instance_profile())
        .is_some_and(|p| p.roles().iter().any(|r| r.role_name() == role)))
}

/// Takes the role out of the profile, deletes the profile, then the role with its policy.
pub async fn delete_worker_profile(
    aws: &AwsClients,
    scope: &Scope<'_>,
    profile: &WorkerProfile,
) -> Result<(), ActivityFailure> {
    let name = profile.instance_profile_name.as_str();
    if let Some(found) = unless_not_found(
        aws.iam
            .get_instance_profile()
            .instance_profile_name(name)
            .send()
            .await,
    )? {
        for role in found
            .instance_profile()
            .map(|p| p.roles())
            .unwrap_or_default()
        {
            let result = aws
                .iam
                .remove_role_from_instance_profile()
                .instance_profile_name(name)
                .role_name(role.role_name())
                .send()
                .await;
            unless_not_found(result)?;
        }
        let result = aws
            .iam
            .delete_instance_profile()
            .instance_profile_name(name)
            .send()
            .await;
        let arn = found
            .instance_profile()
            .map(|p| p.arn().to_owned())
            .unwrap_or_else(|| profile.instance_profile_arn.clone());
        deleted(scope, PROFILE_KIND, &arn, result)?;
    }
    delete_role(aws, scope, &profile.role).await
}
