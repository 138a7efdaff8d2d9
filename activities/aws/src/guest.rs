//! What the guest cluster left in AWS after its HostedCluster was deleted, found by
//! the cluster tag (`kubernetes.io/cluster/<infra>=owned`, as the guest's cloud
//! provider, CSI driver and image-registry operator tag it) and deleted in dependency
//! order, as `hypershift destroy infra` does (cmd/infra/aws/destroy.go): instances, load
//! balancers (classic, then v2 and their target groups), volumes, the image-registry
//! buckets, security groups, and the public `*.apps` record.
//!
//! - [`find`]: the guest's objects (the tag sweep adds them to its own list);
//! - [`delete`]: each kind's delete;
//! - [`delete_guest_resources`]: the activity — delete, look again, fail naming what is
//!   still there (retryable: a load balancer's interfaces hold a security group for a
//!   while).

pub mod delete;
pub mod find;

use hcpflow_engine::ActivityFailure;

use crate::clients::AwsClients;
use crate::scope::Scope;
use crate::sweep::Leftover;

pub use hcpflow_hypershift::aws::guest::{DeleteGuestResources, GuestResourcesDeleted};

pub const INSTANCE_KIND: &str = "ec2:instance";
pub const VOLUME_KIND: &str = "ec2:volume";
pub const CLASSIC_LOAD_BALANCER_KIND: &str = "elb:load-balancer";
pub const BUCKET_KIND: &str = "s3:bucket";
pub const RECORD_KIND: &str = "route53:record";

/// Deletes what the guest left; fails (retryably) naming what is still there after.
pub async fn delete_guest_resources(
    aws: &AwsClients,
    scope: &Scope<'_>,
    request: &DeleteGuestResources,
) -> Result<GuestResourcesDeleted, ActivityFailure> {
    let mut deleted = Vec::new();
    for leftover in find::in_delete_order(aws, &request.infra_id, &request.vpc_id).await? {
        if delete::one(aws, &leftover).await? {
            scope
                .log
                .deleted(scope.resource(&leftover.kind, &leftover.id));
            deleted.push(leftover.to_string());
        }
    }
    if let Some(record) = delete::public_record(aws, request).await? {
        scope.log.deleted(scope.resource(RECORD_KIND, &record));
        deleted.push(format!("{RECORD_KIND} {record}"));
    }
    let mut left: Vec<Leftover> =
        find::in_delete_order(aws, &request.infra_id, &request.vpc_id).await?;
    if let Some(record) = find::public_record(aws, request).await? {
        left.push(Leftover {
            kind: RECORD_KIND.into(),
            id: record,
        });
    }
    if !left.is_empty() {
        let list: Vec<String> = left.iter().map(ToString::to_string).collect();
        return Err(ActivityFailure::retryable(
            "GuestResourcesLeft",
            format!(
                "what the guest of {} made is still there after its deletes: {}",
                request.infra_id,
                list.join(", ")
            ),
        ));
    }
    Ok(GuestResourcesDeleted { deleted })
}
