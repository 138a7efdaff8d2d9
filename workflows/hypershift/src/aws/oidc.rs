//! The cluster's OIDC issuer: the service-account signing key (generated and sealed in
//! the activity) and the discovery document and JWKS in the OIDC bucket.

use crate::aws::aws_activity;
use crate::aws::Delete;
use hcpflow_engine::Activity;
use hcpflow_engine::Sealed;
use serde::{Deserialize, Serialize};

/// Asks for a fresh signing key for the cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GenerateSigningKey {
    pub infra_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PublishOidcDocuments {
    pub infra_id: String,
    pub bucket: String,
    /// The bucket's region (part of the issuer URL).
    pub bucket_region: String,
    pub jwk: Jwk,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OidcDocuments {
    pub issuer_url: String,
    pub bucket: String,
    /// The S3 keys written: the discovery document, then the JWKS.
    pub keys: Vec<String>,
}

/// The signing key of a cluster's service-account tokens.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SigningKey {
    /// The private key, PKCS#8 PEM, sealed (the Secret writer hands it to the operator
    /// as PKCS#1).
    pub private_key: Sealed<String>,
    /// The public key, SubjectPublicKeyInfo PEM.
    pub public_key_pem: String,
    pub jwk: Jwk,
}

/// The public key as a JSON Web Key (RFC 7517), as the JWKS document lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Jwk {
    /// base64url (no padding) of SHA-256 over the SubjectPublicKeyInfo DER: the `kid`
    /// Kubernetes puts in the tokens it signs with this key.
    pub kid: String,
    /// Modulus and exponent, base64url big-endian without padding.
    pub n: String,
    pub e: String,
}

impl Jwk {
    /// The JWKS entry.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "use": "sig", "kty": "RSA", "kid": self.kid, "alg": "RS256",
            "n": self.n, "e": self.e,
        })
    }
}

aws_activity!(PublishOidcDocuments => OidcDocuments, "aws.publish_oidc_documents", creates);
aws_activity!(Delete<OidcDocuments> => (), "aws.delete_oidc_documents");
aws_activity!(GenerateSigningKey => SigningKey, "aws.generate_signing_key");
