//! Finding the guest's objects by the cluster tag (the image-registry bucket by its
//! name, `<infra>-image-registry-…`, and the security groups by the cluster's VPC, as
//! `destroy infra` does).

use aws_sdk_ec2::types::Filter;
use aws_sdk_route53::types::RrType;
use hcpflow_engine::ActivityFailure;

use crate::clients::AwsClients;
use crate::ec2::tags::owned_by;
use crate::error::from_sdk;
use crate::guest::{
    DeleteGuestResources, BUCKET_KIND, CLASSIC_LOAD_BALANCER_KIND, INSTANCE_KIND, VOLUME_KIND,
};
use crate::lookup::unless_not_found;
use crate::naming;
use crate::privatelink::load_balancer::{LOAD_BALANCER_KIND, TARGET_GROUP_KIND};
use crate::privatelink::security_group::KIND as SECURITY_GROUP_KIND;
use crate::route53::records::find_record_set;
use crate::sweep::{elbv2_tagged, Leftover};

/// The kinds the guest makes, in the order they can be deleted.
pub const DELETE_ORDER: [&str; 7] = [
    INSTANCE_KIND,
    CLASSIC_LOAD_BALANCER_KIND,
    LOAD_BALANCER_KIND,
    TARGET_GROUP_KIND,
    VOLUME_KIND,
    BUCKET_KIND,
    SECURITY_GROUP_KIND,
];

fn leftover(kind: &str, id: Option<&str>) -> Option<Leftover> {
    id.map(|id| Leftover {
        kind: kind.to_owned(),
        id: id.to_owned(),
    })
}

/// Instances not terminated, volumes, classic load balancers and registry buckets of
/// the infra id (the tag sweep's part beyond what hcpflow itself makes).
pub async fn guest_only(
    aws: &AwsClients,
    infra_id: &str,
) -> Result<Vec<Leftover>, ActivityFailure> {
    let mut found = Vec::new();
    let instances = aws
        .ec2
        .describe_instances()
        .filters(owned_by(infra_id))
        .filters(
            Filter::builder()
                .name("instance-state-name")
                .set_values(Some(
                    ["pending", "running", "stopping", "stopped", "shutting-down"]
                        .map(String::from)
                        .to_vec(),
                ))
                .build(),
        )
        .send()
        .await
        .map_err(from_sdk)?;
    for reservation in instances.reservations() {
        found.extend(
            reservation
                .instances()
                .iter()
                .filter_map(|i| leftover(INSTANCE_KIND, i.instance_id())),
        );
    }
    let volumes = aws
        .ec2
        .describe_volumes()
        .filters(owned_by(infra_id))
        .send()
        .await
        .map_err(from_sdk)?;
    found.extend(
        volumes
            .volumes()
            .iter()
            .filter(|v| v.state().is_none_or(|s| s.as_str() != "deleted"))
            .filter_map(|v| leftover(VOLUME_KIND, v.volume_id())),
    );
    found.extend(classic_load_balancers(aws, infra_id).await?);
    let prefix = format!("{infra_id}-image-registry-");
    let buckets = aws.s3.list_buckets().send().await.map_err(from_sdk)?;
    found.extend(
        buckets
            .buckets()
            .iter()
            .filter(|b| b.name().is_some_and(|n| n.starts_with(&prefix)))
            .filter_map(|b| leftover(BUCKET_KIND, b.name())),
    );
    Ok(found)
}

async fn classic_load_balancers(
    aws: &AwsClients,
    infra_id: &str,
) -> Result<Vec<Leftover>, ActivityFailure> {
    let mut names = Vec::new();
    let mut marker = None;
    loop {
        let page = aws
            .elb
            .describe_load_balancers()
            .set_marker(marker)
            .send()
            .await
            .map_err(from_sdk)?;
        names.extend(
            page.load_balancer_descriptions()
                .iter()
                .filter_map(|lb| lb.load_balancer_name().map(str::to_owned)),
        );
        marker = page.next_marker().map(str::to_owned);
        if marker.is_none() {
            break;
        }
    }
    let key = naming::cluster_tag_key(infra_id);
    let mut found = Vec::new();
    for batch in names.chunks(20) {
        let described = aws
            .elb
            .describe_tags()
            .set_load_balancer_names(Some(batch.to_vec()))
            .send()
            .await;
        let Some(described) = unless_not_found(described)? else {
            continue;
        };
        for description in described.tag_descriptions() {
            let owned = description
                .tags()
                .iter()
                .any(|t| t.key() == key.as_str() && t.value() == Some(naming::CLUSTER_TAG_VALUE));
            if owned {
                found.extend(leftover(
                    CLASSIC_LOAD_BALANCER_KIND,
                    description.load_balancer_name(),
                ));
            }
        }
    }
    Ok(found)
}

/// Every guest object of the infra id, in [`DELETE_ORDER`]; the security groups are
/// every one in the cluster's VPC but `default`, tagged or not, as `destroy infra`
/// (`DestroySecurityGroups`) takes them: the VPC is the cluster's alone.
pub async fn in_delete_order(
    aws: &AwsClients,
    infra_id: &str,
    vpc_id: &str,
) -> Result<Vec<Leftover>, ActivityFailure> {
    let mut found = guest_only(aws, infra_id).await?;
    found.extend(elbv2_tagged(aws, infra_id).await?);
    let groups = aws
        .ec2
        .describe_security_groups()
        .filters(Filter::builder().name("vpc-id").values(vpc_id).build())
        .send()
        .await
        .map_err(from_sdk)?;
    found.extend(
        groups
            .security_groups()
            .iter()
            .filter(|g| g.group_name() != Some("default"))
            .filter_map(|g| leftover(SECURITY_GROUP_KIND, g.group_id())),
    );
    found.sort_by_key(|l| DELETE_ORDER.iter().position(|k| *k == l.kind));
    Ok(found)
}

/// The guest's public `*.apps` record (CNAME or alias A), if it is there.
pub async fn public_record(
    aws: &AwsClients,
    request: &DeleteGuestResources,
) -> Result<Option<String>, ActivityFailure> {
    Ok(public_record_set(aws, request)
        .await?
        .map(|_| format!("{}/{}", request.public_zone_id, request.apps_record)))
}

pub(crate) async fn public_record_set(
    aws: &AwsClients,
    request: &DeleteGuestResources,
) -> Result<Option<aws_sdk_route53::types::ResourceRecordSet>, ActivityFailure> {
    find_record_set(
        aws,
        &request.public_zone_id,
        &request.apps_record,
        &[RrType::Cname, RrType::A],
    )
    .await
}
