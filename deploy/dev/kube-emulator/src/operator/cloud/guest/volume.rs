//! A guest PersistentVolume: the `default/guest-data` claim of the default storage
//! class (`gp3-csi`: gp3, encrypted), provisioned by the EBS CSI driver
//! (aws-ebs-csi-driver `pkg/driver/controller.go` `CreateVolume`, `pkg/cloud`
//! `CreateDisk`; removed by `DeleteVolume` when the PersistentVolume goes, reclaim
//! policy Delete).
//!
//! 10 GiB in the zone of the first NodePool subnet, tagged as the driver tags with the
//! cluster id OpenShift gives it (`--k8s-tag-cluster-id=<infraID>` and the
//! Infrastructure's resource tags as `--extra-tags`): `CSIVolumeName`,
//! `kubernetes.io/created-for/pv/name=pvc-<uid>`, `kubernetes.io/created-for/pvc/name`,
//! `kubernetes.io/created-for/pvc/namespace`, `ebs.csi.aws.com/cluster=true`,
//! `kubernetes.io/cluster/<infraID>=owned` and `Name=<infraID>-dynamic-pvc-<uid>`. The
//! PersistentVolume's uid is derived from the HostedCluster's, so the volume is found
//! again by its tags.

use aws_sdk_ec2::types::{ResourceType, Tag, TagSpecification, VolumeState, VolumeType};

use super::super::aws::{sdk, AwsError, Clients, Service};
use super::super::load_balancer::hash;
use super::super::spec::Cluster;
use super::{ec2_filter, owned_tags};

const CLAIM_NAMESPACE: &str = "default";
const CLAIM: &str = "guest-data";
const SIZE_GIB: i32 = 10;

/// `pvc-<uid>`, the uid a UUID made of the HostedCluster's uid and the claim's name.
fn pv_name(cluster: &Cluster) -> String {
    let h = hash(&[&cluster.uid, CLAIM_NAMESPACE, CLAIM]);
    format!(
        "pvc-{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

fn tags(cluster: &Cluster) -> Vec<(String, String)> {
    let pv = pv_name(cluster);
    let mut tags = vec![
        ("CSIVolumeName".to_owned(), pv.clone()),
        ("kubernetes.io/created-for/pv/name".to_owned(), pv.clone()),
        (
            "kubernetes.io/created-for/pvc/name".to_owned(),
            CLAIM.to_owned(),
        ),
        (
            "kubernetes.io/created-for/pvc/namespace".to_owned(),
            CLAIM_NAMESPACE.to_owned(),
        ),
        ("ebs.csi.aws.com/cluster".to_owned(), "true".to_owned()),
    ];
    tags.extend(owned_tags(cluster));
    if !tags.iter().any(|(k, _)| k == "Name") {
        tags.push((
            "Name".to_owned(),
            format!("{}-dynamic-{pv}", cluster.infra_id),
        ));
    }
    tags
}

fn is_gone(state: Option<&VolumeState>) -> bool {
    matches!(state, Some(VolumeState::Deleting | VolumeState::Deleted))
}

/// The ids of the live volumes of this PersistentVolume.
async fn find(clients: &Clients, cluster: &Cluster) -> Result<Vec<String>, AwsError> {
    let found = clients
        .ec2
        .describe_volumes()
        .filters(ec2_filter(
            "tag:kubernetes.io/created-for/pv/name",
            &pv_name(cluster),
        ))
        .filters(ec2_filter(
            &format!("tag:kubernetes.io/cluster/{}", cluster.infra_id),
            "owned",
        ))
        .send()
        .await
        .map_err(|e| sdk(Service::Ec2, "DescribeVolumes", e))?;
    Ok(found
        .volumes()
        .iter()
        .filter(|v| !is_gone(v.state()))
        .filter_map(|v| v.volume_id().map(str::to_owned))
        .collect())
}

/// Ensures the volume in `zone`.
pub(super) async fn ensure(
    clients: &Clients,
    cluster: &Cluster,
    zone: &str,
) -> Result<(), AwsError> {
    if !find(clients, cluster).await?.is_empty() {
        return Ok(());
    }
    let ec2_tags: Vec<Tag> = tags(cluster)
        .into_iter()
        .map(|(k, v)| Tag::builder().key(k).value(v).build())
        .collect();
    let created = clients
        .ec2
        .create_volume()
        .availability_zone(zone)
        .size(SIZE_GIB)
        .volume_type(VolumeType::Gp3)
        .encrypted(true)
        .tag_specifications(
            TagSpecification::builder()
                .resource_type(ResourceType::Volume)
                .set_tags(Some(ec2_tags))
                .build(),
        )
        .send()
        .await
        .map_err(|e| sdk(Service::Ec2, "CreateVolume", e))?;
    tracing::info!(cluster = %cluster.name, volume = created.volume_id().unwrap_or_default(),
                   %zone, pv = %pv_name(cluster), "the guest's EBS CSI driver created a volume");
    Ok(())
}

/// Deletes the volume(s); whether there were any.
pub(super) async fn destroy(clients: &Clients, cluster: &Cluster) -> Result<bool, AwsError> {
    let volumes = find(clients, cluster).await?;
    for id in &volumes {
        let deleted = clients
            .ec2
            .delete_volume()
            .volume_id(id)
            .send()
            .await
            .map_err(|e| sdk(Service::Ec2, "DeleteVolume", e));
        match deleted {
            Err(e) if !e.is_not_found() => return Err(e),
            _ => {
                tracing::info!(cluster = %cluster.name, volume = %id,
                               "the guest's EBS CSI driver deleted a volume")
            }
        }
    }
    Ok(!volumes.is_empty())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_persistent_volume_is_named_like_a_uid() {
        let cluster = super::super::super::spec::Cluster::read(
            &serde_json::json!({"metadata": {"name": "c", "namespace": "n", "uid": "u"}}),
            &[],
        );
        let pv = super::pv_name(&cluster);
        assert!(pv.starts_with("pvc-"), "{pv}");
        assert_eq!(pv.len(), 40, "{pv}");
        assert_eq!(pv.matches('-').count(), 5, "{pv}");
    }
}
