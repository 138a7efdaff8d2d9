//! The RSA-2048 service-account signing key, generated inside the activity and returned
//! sealed: its plaintext exists only here and in the activity that writes it into the
//! `<name>-sa-token-issuer-key` Secret.

use aws_lc_rs::encoding::{AsDer, Pkcs8V1Der, PublicKeyX509Der};
use aws_lc_rs::rsa::{KeyPair, KeySize};
use aws_lc_rs::signature::KeyPair as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use hcpflow_engine::{ActivityFailure, Binding, Keyring, WorkflowId};
use hcpflow_hypershift::kube::secrets::SIGNING_KEY_PURPOSE;
use sha2::{Digest, Sha256};

pub use hcpflow_hypershift::aws::oidc::{Jwk, SigningKey};

/// Generates a fresh key and seals its private half with the active seal key, for
/// `workflow_id` ([`SIGNING_KEY_PURPOSE`]).
pub fn generate_signing_key(
    keyring: &Keyring,
    workflow_id: &WorkflowId,
) -> Result<SigningKey, ActivityFailure> {
    let failed = |what: &str| ActivityFailure::retryable("KeyGeneration", what.to_owned());
    let pair =
        KeyPair::generate(KeySize::Rsa2048).map_err(|_| failed("RSA key generation failed"))?;
    let private: Pkcs8V1Der<'_> =
        AsDer::<Pkcs8V1Der<'_>>::as_der(&pair).map_err(|_| failed("PKCS#8 encoding failed"))?;
    let public = pair.public_key();
    let spki: PublicKeyX509Der<'_> = public
        .as_der()
        .map_err(|_| failed("public key encoding failed"))?;
    let jwk = Jwk {
        kid: URL_SAFE_NO_PAD.encode(Sha256::digest(spki.as_ref())),
        n: URL_SAFE_NO_PAD.encode(public.modulus().big_endian_without_leading_zero()),
        e: URL_SAFE_NO_PAD.encode(public.exponent().big_endian_without_leading_zero()),
    };
    let private_key = keyring
        .seal(
            &pem("PRIVATE KEY", private.as_ref()),
            &Binding::new(workflow_id, SIGNING_KEY_PURPOSE),
        )
        .map_err(|e| ActivityFailure::permanent("Seal", e.to_string()))?;
    Ok(SigningKey {
        private_key,
        public_key_pem: pem("PUBLIC KEY", spki.as_ref()),
        jwk,
    })
}

/// PEM: base64 in lines of 64 between BEGIN and END lines.
fn pem(label: &str, der: &[u8]) -> String {
    let body = STANDARD.encode(der);
    let mut text = format!("-----BEGIN {label}-----\n");
    for line in body.as_bytes().chunks(64) {
        text.push_str(std::str::from_utf8(line).unwrap_or_default());
        text.push('\n');
    }
    text.push_str(&format!("-----END {label}-----\n"));
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_is_rsa_2048_sealed_and_its_kid_is_the_spki_digest() {
        let keyring = Keyring::parse(&format!("k1:{}", STANDARD.encode([7u8; 32]))).unwrap();
        let id = WorkflowId::new("create-demo").unwrap();
        let key = generate_signing_key(&keyring, &id).unwrap();
        let pem_body: String = key
            .public_key_pem
            .lines()
            .filter(|line| !line.starts_with("-----"))
            .collect();
        let spki = STANDARD.decode(pem_body).unwrap();
        assert_eq!(key.jwk.kid, URL_SAFE_NO_PAD.encode(Sha256::digest(&spki)));
        assert_eq!(key.jwk.e, "AQAB");
        assert_eq!(URL_SAFE_NO_PAD.decode(&key.jwk.n).unwrap().len(), 256);
        let wire = serde_json::to_string(&key).unwrap();
        assert!(
            !wire.contains("PRIVATE KEY"),
            "the private key left unsealed"
        );
        let private = keyring
            .open(&key.private_key, &Binding::new(&id, SIGNING_KEY_PURPOSE))
            .unwrap();
        assert!(private.starts_with("-----BEGIN PRIVATE KEY-----\n"));
        let again = generate_signing_key(&keyring, &id).unwrap();
        assert_ne!(again.jwk.kid, key.jwk.kid, "every run makes a fresh key");
    }
}
