//! The discovery document and JWKS in the OIDC bucket, under `<infra-id>/`.
//!
//! The bucket is a prerequisite (public read by bucket policy, as HyperShift documents
//! it); a missing bucket is a permanent failure that says so. The objects' bytes depend
//! only on the request, so a repeated upload rewrites the same documents.

use aws_sdk_s3::primitives::ByteStream;
use hcpflow_engine::ActivityFailure;

use crate::clients::AwsClients;
use crate::error::from_sdk;
use crate::lookup::deleted;
use crate::oidc::{discovery_key, issuer_url, jwks_key};
use crate::scope::Scope;

pub use hcpflow_hypershift::aws::oidc::{OidcDocuments, PublishOidcDocuments};

pub const KIND: &str = "s3:object";

/// The discovery document for `issuer`.
pub fn discovery_document(issuer: &str) -> serde_json::Value {
    serde_json::json!({
        "issuer": issuer,
        "jwks_uri": format!("{issuer}/openid/v1/jwks"),
        "response_types_supported": ["id_token"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["RS256"],
    })
}

/// Checks the bucket, then writes both documents.
pub async fn publish_oidc_documents(
    aws: &AwsClients,
    scope: &Scope<'_>,
    request: &PublishOidcDocuments,
) -> Result<OidcDocuments, ActivityFailure> {
    // The bucket's region was found by the create's prerequisites check.
    let aws = &if request.bucket_region == aws.region {
        aws.clone()
    } else {
        aws.in_region(&request.bucket_region)
    };
    check_bucket(aws, &request.bucket).await?;
    let issuer = issuer_url(&request.bucket, &request.bucket_region, &request.infra_id);
    let jwks = serde_json::json!({ "keys": [request.jwk.to_json()] });
    let documents = [
        (
            discovery_key(&request.infra_id),
            discovery_document(&issuer),
        ),
        (jwks_key(&request.infra_id), jwks),
    ];
    for (key, document) in &documents {
        let body = serde_json::to_vec_pretty(document)
            .map_err(|e| ActivityFailure::permanent("Encoding", e.to_string()))?;
        aws.s3
            .put_object()
            .bucket(&request.bucket)
            .key(key)
            .content_type("application/json")
            .body(ByteStream::from(body))
            .send()
            .await
            .map_err(from_sdk)?;
        scope
            .log
            .created(scope.resource(KIND, &format!("{}/{key}", request.bucket)));
    }
    Ok(OidcDocuments {
        issuer_url: issuer,
        bucket: request.bucket.clone(),
        keys: documents.into_iter().map(|(key, _)| key).collect(),
    })
}

/// A permanent `OidcBucketMissing` when the bucket does not exist.
pub async fn check_bucket(aws: &AwsClients, bucket: &str) -> Result<(), ActivityFailure> {
    match aws.s3.head_bucket().bucket(bucket).send().await {
        Ok(_) => Ok(()),
        Err(error) => Err(not_found_is_missing(bucket, from_sdk(error))),
    }
}

fn not_found_is_missing(bucket: &str, error: crate::error::AwsError) -> ActivityFailure {
    if error.is_not_found() {
        ActivityFailure::permanent(
            "OidcBucketMissing",
            format!(
                "the OIDC bucket {bucket:?} does not exist: create it (public read by \
                 bucket policy) before the cluster; it is a prerequisite"
            ),
        )
    } else {
        error.into()
    }
}
/// The region `bucket` is in. HeadBucket answers it from any region: in its
/// `x-amz-bucket-region` header, on success or on the 301 a regional endpoint answers
/// for a bucket elsewhere (the Rust SDK does not follow that redirect).
pub async fn bucket_region(aws: &AwsClients, bucket: &str) -> Result<String, ActivityFailure> {
    match aws.s3.head_bucket().bucket(bucket).send().await {
        Ok(head) => Ok(head
            .bucket_region()
            .map_or_else(|| aws.region.clone(), str::to_owned)),
        Err(error) => {
            let elsewhere = error
                .raw_response()
                .and_then(|raw| raw.headers().get("x-amz-bucket-region"))
                .map(str::to_owned);
            match elsewhere {
                Some(region) => Ok(region),
                None => Err(not_found_is_missing(bucket, from_sdk(error))),
            }
        }
    }
}

/// The clients of `bucket`'s region: S3 calls on the OIDC bucket go there, wherever the
/// cluster is.
pub async fn bucket_clients(aws: &AwsClients, bucket: &str) -> Result<AwsClients, ActivityFailure> {
    let region = bucket_region(aws, bucket).await?;
    Ok(if region == aws.region {
        aws.clone()
    } else {
        aws.in_region(&region)
    })
}

/// Deletes both documents; documents (or a bucket) already gone are done.
pub async fn delete_oidc_documents(
    aws: &AwsClients,
    scope: &Scope<'_>,
    documents: &OidcDocuments,
) -> Result<(), ActivityFailure> {
    // A bucket already gone holds nothing to delete.
    let aws = &match bucket_clients(aws, &documents.bucket).await {
        Ok(clients) => clients,
        Err(failure) if failure.kind == "OidcBucketMissing" => return Ok(()),
        Err(failure) => return Err(failure),
    };
    for key in &documents.keys {
        // S3 answers a delete of a missing object with success, so ask first to keep
        // the ledger honest.
        let head = aws
            .s3
            .head_object()
            .bucket(&documents.bucket)
            .key(key)
            .send()
            .await;
        if crate::lookup::unless_not_found(head)?.is_none() {
            continue;
        }
        let result = aws
            .s3
            .delete_object()
            .bucket(&documents.bucket)
            .key(key)
            .send()
            .await;
        deleted(scope, KIND, &format!("{}/{key}", documents.bucket), result)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discovery_points_at_the_jwks_under_the_issuer() {
        let issuer = issuer_url("hcpflow-oidc", "us-east-1", "demo-x7k2p");
        assert_eq!(
            issuer,
            "https://hcpflow-oidc.s3.us-east-1.amazonaws.com/demo-x7k2p"
        );
        let document = discovery_document(&issuer);
        assert_eq!(document["jwks_uri"], format!("{issuer}/openid/v1/jwks"));
        assert_eq!(
            document["id_token_signing_alg_values_supported"][0],
            "RS256"
        );
        assert_eq!(
            discovery_key("demo-x7k2p"),
            "demo-x7k2p/.well-known/openid-configuration"
        );
        assert_eq!(jwks_key("demo-x7k2p"), "demo-x7k2p/openid/v1/jwks");
    }
}
