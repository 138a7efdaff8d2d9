//! The cluster's OIDC issuer (hypershift-aws.md §3): the service-account signing key,
//! and the discovery document and JWKS that STS fetches from the OIDC bucket.
//!
//! Two activities, so that each is safe to repeat: [`signing_key`] makes a fresh key and
//! returns it sealed (a repeated run makes another key, but only one result is ever
//! recorded); [`documents`] publishes the recorded key's public half, the same bytes
//! however often it runs.

pub mod documents;
pub mod signing_key;

/// The issuer URL of a cluster: `https://<bucket>.s3.<region>.amazonaws.com/<infra-id>`.
pub fn issuer_url(bucket: &str, bucket_region: &str, infra_id: &str) -> String {
    format!("https://{bucket}.s3.{bucket_region}.amazonaws.com/{infra_id}")
}

/// The S3 key of the discovery document.
pub fn discovery_key(infra_id: &str) -> String {
    format!("{infra_id}/.well-known/openid-configuration")
}

/// The S3 key of the JWKS.
pub fn jwks_key(infra_id: &str) -> String {
    format!("{infra_id}/openid/v1/jwks")
}
