//! Each guest kind's delete. Something already gone is done (`Ok(false)`); a dependency
//! still in place (a load balancer's interfaces holding a security group, a target
//! group still in use) is a retryable failure, as everywhere.

use aws_sdk_ec2::types::IpPermission;
use aws_sdk_route53::types::{Change, ChangeAction, ChangeBatch};
use aws_sdk_s3::types::{Delete, ObjectIdentifier};
use hcpflow_engine::ActivityFailure;

use crate::clients::AwsClients;
use crate::error::from_sdk;
use crate::guest::find::public_record_set;
use crate::guest::{
    DeleteGuestResources, BUCKET_KIND, CLASSIC_LOAD_BALANCER_KIND, INSTANCE_KIND, VOLUME_KIND,
};
use crate::lookup::unless_not_found;
use crate::privatelink::load_balancer::{LOAD_BALANCER_KIND, TARGET_GROUP_KIND};
use crate::privatelink::security_group::KIND as SECURITY_GROUP_KIND;
use crate::sweep::Leftover;

/// Deletes one object; whether it was there.
pub async fn one(aws: &AwsClients, leftover: &Leftover) -> Result<bool, ActivityFailure> {
    let id = leftover.id.as_str();
    let done = match leftover.kind.as_str() {
        INSTANCE_KIND => {
            unless_not_found(aws.ec2.terminate_instances().instance_ids(id).send().await)?.is_some()
        }
        CLASSIC_LOAD_BALANCER_KIND => unless_not_found(
            aws.elb
                .delete_load_balancer()
                .load_balancer_name(id)
                .send()
                .await,
        )?
        .is_some(),
        LOAD_BALANCER_KIND => unless_not_found(
            aws.elbv2
                .delete_load_balancer()
                .load_balancer_arn(id)
                .send()
                .await,
        )?
        .is_some(),
        TARGET_GROUP_KIND => unless_not_found(
            aws.elbv2
                .delete_target_group()
                .target_group_arn(id)
                .send()
                .await,
        )?
        .is_some(),
        VOLUME_KIND => {
            unless_not_found(aws.ec2.delete_volume().volume_id(id).send().await)?.is_some()
        }
        BUCKET_KIND => bucket(aws, id).await?,
        SECURITY_GROUP_KIND => security_group(aws, id).await?,
        other => {
            return Err(ActivityFailure::permanent(
                "UnknownGuestKind",
                format!("no delete for {other} {id}"),
            ))
        }
    };
    Ok(done)
}

/// Empties the bucket, then deletes it.
async fn bucket(aws: &AwsClients, name: &str) -> Result<bool, ActivityFailure> {
    loop {
        let listed = aws.s3.list_objects_v2().bucket(name).send().await;
        let Some(listed) = unless_not_found(listed)? else {
            return Ok(false);
        };
        let keys: Vec<ObjectIdentifier> = listed
            .contents()
            .iter()
            .filter_map(|o| o.key())
            .filter_map(|key| ObjectIdentifier::builder().key(key).build().ok())
            .collect();
        if keys.is_empty() {
            break;
        }
        let batch = Delete::builder()
            .set_objects(Some(keys))
            .build()
            .map_err(|e| ActivityFailure::permanent("InvalidDelete", e.to_string()))?;
        aws.s3
            .delete_objects()
            .bucket(name)
            .delete(batch)
            .send()
            .await
            .map_err(from_sdk)?;
    }
    Ok(unless_not_found(aws.s3.delete_bucket().bucket(name).send().await)?.is_some())
}

/// Revokes the group's rules, in and out (groups of one cluster refer to each other),
/// then deletes it — as `destroy infra`'s `DestroySecurityGroups` does.
async fn security_group(aws: &AwsClients, id: &str) -> Result<bool, ActivityFailure> {
    let described = unless_not_found(
        aws.ec2
            .describe_security_groups()
            .group_ids(id)
            .send()
            .await,
    )?;
    let Some(group) = described.and_then(|d| d.security_groups().first().cloned()) else {
        return Ok(false);
    };
    let ingress: Vec<IpPermission> = group.ip_permissions().to_vec();
    if !ingress.is_empty() {
        unless_not_found(
            aws.ec2
                .revoke_security_group_ingress()
                .group_id(id)
                .set_ip_permissions(Some(ingress))
                .send()
                .await,
        )?;
    }
    let egress: Vec<IpPermission> = group.ip_permissions_egress().to_vec();
    if !egress.is_empty() {
        unless_not_found(
            aws.ec2
                .revoke_security_group_egress()
                .group_id(id)
                .set_ip_permissions(Some(egress))
                .send()
                .await,
        )?;
    }
    Ok(unless_not_found(aws.ec2.delete_security_group().group_id(id).send().await)?.is_some())
}

/// Deletes the guest's public `*.apps` record (as it is now); its id if it was there.
pub async fn public_record(
    aws: &AwsClients,
    request: &DeleteGuestResources,
) -> Result<Option<String>, ActivityFailure> {
    let Some(set) = public_record_set(aws, request).await? else {
        return Ok(None);
    };
    let change = Change::builder()
        .action(ChangeAction::Delete)
        .resource_record_set(set)
        .build()
        .and_then(|change| ChangeBatch::builder().changes(change).build())
        .map_err(|e| ActivityFailure::permanent("InvalidChange", e.to_string()))?;
    let answer = aws
        .route53
        .change_resource_record_sets()
        .hosted_zone_id(&request.public_zone_id)
        .change_batch(change)
        .send()
        .await;
    Ok(unless_not_found(answer)?
        .map(|_| format!("{}/{}", request.public_zone_id, request.apps_record)))
}
