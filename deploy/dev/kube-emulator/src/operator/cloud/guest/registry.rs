//! The image registry's storage: the guest's cluster-image-registry-operator makes an
//! S3 bucket for the registry (`pkg/storage/s3/s3.go`: `CreateStorage`; the name from
//! `pkg/storage/util` `GenerateStorageName(listers, region)`), and removes it with its
//! objects when the registry's management state becomes Removed (`RemoveStorage`).
//!
//! - the name `<infraID>-image-registry-<region>-<letters>`, 62 characters in all: the
//!   operator joins infrastructure name, `image-registry` and region with dashes (runs
//!   of dashes made one), pads with random lowercase letters (`a`…`y`) after a dash up to
//!   62 or cuts at 62; the emulator's letters are derived from the HostedCluster's uid,
//!   so the name is the same on every pass and after a restart;
//! - tagged (PutBucketTagging) with `kubernetes.io/cluster/<infraID>=owned` and the
//!   Infrastructure's resource tags; default encryption AES256 and every public access
//!   blocked, as the operator sets them;
//! - one blob and its layer link, as a first image push leaves them.
//!
//! Found by its prefix `<infraID>-image-registry-` (what `hypershift destroy infra`
//! looks for too) among ListBuckets. The operator acts with the image registry role;
//! the emulator, with the management credentials.

use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{
    BucketLocationConstraint, CreateBucketConfiguration, PublicAccessBlockConfiguration,
    ServerSideEncryption, ServerSideEncryptionByDefault, ServerSideEncryptionConfiguration,
    ServerSideEncryptionRule, Tag, Tagging,
};

use super::super::aws::{sdk, unbuilt, AwsError, Clients, Service};
use super::super::load_balancer::hash;
use super::super::spec::Cluster;
use super::owned_tags;

/// The longest name `GenerateStorageName` makes.
const NAME_LENGTH: usize = 62;

/// The parts joined by dashes, runs of dashes made one, lowercase.
fn joined(parts: &[&str]) -> String {
    let joined = parts
        .iter()
        .filter(|part| !part.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join("-")
        .to_ascii_lowercase();
    let mut name = String::new();
    for c in joined.chars() {
        if !(c == '-' && name.ends_with('-')) {
            name.push(c);
        }
    }
    name
}

/// What every registry bucket of the cluster starts with.
fn prefix(cluster: &Cluster) -> String {
    format!("{}-", joined(&[&cluster.infra_id, "image-registry"]))
}

/// `GenerateStorageName(listers, region)`, with letters from the HostedCluster's uid.
fn bucket_name(cluster: &Cluster, region: &str) -> String {
    let name = joined(&[&cluster.infra_id, "image-registry", region]);
    let letters: Vec<char> = [
        hash(&[&cluster.uid, "image-registry"]),
        hash(&[&cluster.uid, "image-registry", "more"]),
    ]
    .concat()
    .as_bytes()
    .chunks(2)
    .map(|pair| {
        let value = u8::from_str_radix(std::str::from_utf8(pair).unwrap_or("00"), 16).unwrap_or(0);
        char::from(b'a' + value % 25)
    })
    .collect();
    match name.len() {
        n if n < NAME_LENGTH => {
            let padding: String = letters.iter().take(NAME_LENGTH - n - 1).collect();
            format!("{name}-{padding}")
        }
        n if n > NAME_LENGTH => {
            let mut cut: String = name.chars().take(NAME_LENGTH).collect();
            if cut.ends_with('-') {
                cut.pop();
                cut.push(letters[0]);
            }
            cut
        }
        _ => name,
    }
}

/// The guest's registry buckets (by the operator's prefix).
async fn find(clients: &Clients, cluster: &Cluster) -> Result<Vec<String>, AwsError> {
    let listed = clients
        .s3
        .list_buckets()
        .send()
        .await
        .map_err(|e| sdk(Service::S3, "ListBuckets", e))?;
    let prefix = prefix(cluster);
    Ok(listed
        .buckets()
        .iter()
        .filter_map(|b| b.name())
        .filter(|name| name.starts_with(&prefix))
        .map(str::to_owned)
        .collect())
}

fn tagging(cluster: &Cluster) -> Result<Tagging, AwsError> {
    let unbuilt = |e| unbuilt(Service::S3, "PutBucketTagging", e);
    let tags = owned_tags(cluster)
        .into_iter()
        .map(|(k, v)| Tag::builder().key(k).value(v).build().map_err(unbuilt))
        .collect::<Result<Vec<Tag>, AwsError>>()?;
    Tagging::builder()
        .set_tag_set(Some(tags))
        .build()
        .map_err(unbuilt)
}

/// `CreateStorage`: the bucket, its tags, encryption and public access block, and what
/// a first push leaves in it.
pub(super) async fn ensure(
    clients: &Clients,
    cluster: &Cluster,
    region: &str,
) -> Result<(), AwsError> {
    let region = if cluster.region.is_empty() {
        region
    } else {
        cluster.region.as_str()
    };
    let name = bucket_name(cluster, region);
    if find(clients, cluster).await?.contains(&name) {
        return Ok(());
    }
    let s3 = &clients.s3;
    let client_region = s3
        .config()
        .region()
        .map(|r| r.as_ref().to_owned())
        .unwrap_or_default();
    let mut create = s3.create_bucket().bucket(&name);
    if !client_region.is_empty() && client_region != "us-east-1" {
        create = create.create_bucket_configuration(
            CreateBucketConfiguration::builder()
                .location_constraint(BucketLocationConstraint::from(client_region.as_str()))
                .build(),
        );
    }
    let created = create
        .send()
        .await
        .map_err(|e| sdk(Service::S3, "CreateBucket", e));
    match created {
        Err(e) if e.code() != "BucketAlreadyOwnedByYou" => return Err(e),
        _ => {}
    }
    s3.put_bucket_tagging()
        .bucket(&name)
        .tagging(tagging(cluster)?)
        .send()
        .await
        .map_err(|e| sdk(Service::S3, "PutBucketTagging", e))?;
    let by_default = ServerSideEncryptionByDefault::builder()
        .sse_algorithm(ServerSideEncryption::Aes256)
        .build()
        .map_err(|e| unbuilt(Service::S3, "PutBucketEncryption", e))?;
    s3.put_bucket_encryption()
        .bucket(&name)
        .server_side_encryption_configuration(
            ServerSideEncryptionConfiguration::builder()
                .rules(
                    ServerSideEncryptionRule::builder()
                        .apply_server_side_encryption_by_default(by_default)
                        .build(),
                )
                .build()
                .map_err(|e| unbuilt(Service::S3, "PutBucketEncryption", e))?,
        )
        .send()
        .await
        .map_err(|e| sdk(Service::S3, "PutBucketEncryption", e))?;
    s3.put_public_access_block()
        .bucket(&name)
        .public_access_block_configuration(
            PublicAccessBlockConfiguration::builder()
                .block_public_acls(true)
                .block_public_policy(true)
                .ignore_public_acls(true)
                .restrict_public_buckets(true)
                .build(),
        )
        .send()
        .await
        .map_err(|e| sdk(Service::S3, "PutPublicAccessBlock", e))?;
    let digest = hash(&[&cluster.uid, "layer"]);
    let objects = [
        (
            format!(
                "docker/registry/v2/blobs/sha256/{}/{digest}/data",
                &digest[..2]
            ),
            format!("layer of {}", cluster.name),
        ),
        (
            format!(
                "docker/registry/v2/repositories/default/guest-app/_layers/sha256/{digest}/link"
            ),
            format!("sha256:{digest}"),
        ),
    ];
    for (key, body) in objects {
        s3.put_object()
            .bucket(&name)
            .key(key)
            .body(ByteStream::from(body.into_bytes()))
            .send()
            .await
            .map_err(|e| sdk(Service::S3, "PutObject", e))?;
    }
    tracing::info!(cluster = %cluster.name, bucket = %name,
                   "the guest's image registry operator created its bucket");
    Ok(())
}

/// `RemoveStorage`: every object, then the bucket; whether there was one.
pub(super) async fn destroy(clients: &Clients, cluster: &Cluster) -> Result<bool, AwsError> {
    let buckets = find(clients, cluster).await?;
    for bucket in &buckets {
        empty(clients, bucket).await?;
        let deleted = clients
            .s3
            .delete_bucket()
            .bucket(bucket)
            .send()
            .await
            .map_err(|e| sdk(Service::S3, "DeleteBucket", e));
        match deleted {
            Err(e) if !e.is_not_found() => return Err(e),
            _ => tracing::info!(cluster = %cluster.name, %bucket,
                                "the guest's image registry operator deleted its bucket"),
        }
    }
    Ok(!buckets.is_empty())
}

async fn empty(clients: &Clients, bucket: &str) -> Result<(), AwsError> {
    let mut token = None;
    loop {
        let page = clients
            .s3
            .list_objects_v2()
            .bucket(bucket)
            .set_continuation_token(token.take())
            .send()
            .await
            .map_err(|e| sdk(Service::S3, "ListObjectsV2", e));
        let page = match page {
            Ok(page) => page,
            Err(e) if e.is_not_found() => return Ok(()),
            Err(e) => return Err(e),
        };
        for object in page.contents() {
            let Some(key) = object.key() else { continue };
            clients
                .s3
                .delete_object()
                .bucket(bucket)
                .key(key)
                .send()
                .await
                .map_err(|e| sdk(Service::S3, "DeleteObject", e))?;
        }
        match page.next_continuation_token() {
            Some(next) if page.is_truncated() == Some(true) => token = Some(next.to_owned()),
            _ => return Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(infra: &str) -> Cluster {
        Cluster::read(
            &serde_json::json!({"metadata": {"name": "c", "namespace": "n", "uid": "u-1"},
                                "spec": {"infraID": infra}}),
            &[],
        )
    }

    #[test]
    fn bucket_names_are_padded_or_cut_to_62_lowercase_characters() {
        let short = bucket_name(&cluster("Demo-abc12"), "us-east-1");
        assert!(
            short.starts_with("demo-abc12-image-registry-us-east-1-"),
            "{short}"
        );
        assert_eq!(short.len(), 62);
        assert!(short
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'));
        assert_eq!(short, bucket_name(&cluster("Demo-abc12"), "us-east-1"));
        let long = bucket_name(&cluster(&"x".repeat(40)), "us-east-1");
        assert_eq!(long.len(), 62);
        assert!(!long.ends_with('-'));
        let dashes = bucket_name(&cluster("a--b"), "us-east-1");
        assert!(dashes.starts_with("a-b-image-registry-"), "{dashes}");
    }
}
