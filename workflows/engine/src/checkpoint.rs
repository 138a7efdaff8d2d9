//! Signed checkpoints of a history (DESIGN.md §7): the audit key (Ed25519) signs
//! (workflow id, seq, head hash). The chain makes one changed event detectable; a
//! signed head also catches truncation and a wholesale rewrite of the chain, because
//! whoever rewrites it cannot sign the new head.
//!
//! The signed bytes are `hcpflow-checkpoint-v1\n<workflow id>\n<seq>\n<head hash hex>`:
//! unambiguous (a workflow id has no newline) and independent of any JSON form.

use std::fmt;

use base64::Engine as _;
use ring::signature::{self, Ed25519KeyPair, KeyPair, UnparsedPublicKey};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::chain::ChainHash;
use crate::ids::{Seq, WorkflowId};

const DOMAIN: &str = "hcpflow-checkpoint-v1";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckpointError {
    #[error("the audit signing key must be 32 bytes, base64 or hex (an Ed25519 seed): {0}")]
    BadSigningKey(String),
    #[error("the audit public key must be 32 bytes, base64 or hex: {0}")]
    BadPublicKey(String),
    #[error("checkpoint signed by key {found}, not by the audit key {expected}")]
    OtherKey { expected: String, found: String },
    #[error("the checkpoint's signature does not verify: (workflow id, seq, head hash) were changed, or it was not signed by the audit key")]
    BadSignature,
}

/// A signed head.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub workflow_id: WorkflowId,
    pub seq: Seq,
    pub head_hash: ChainHash,
    /// The first 16 hex digits of SHA-256 of the public key: which key signed.
    pub key_id: String,
    /// 64 bytes, hex.
    #[serde(with = "hex_bytes")]
    pub signature: Vec<u8>,
}

impl Checkpoint {
    fn message(workflow_id: &WorkflowId, seq: Seq, head_hash: &ChainHash) -> String {
        format!("{DOMAIN}\n{workflow_id}\n{seq}\n{}", head_hash.to_hex())
    }
}

/// The private audit key.
pub struct AuditSigningKey {
    pair: Ed25519KeyPair,
    public: AuditPublicKey,
}

impl fmt::Debug for AuditSigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AuditSigningKey({})", self.public.key_id())
    }
}

impl AuditSigningKey {
    /// From a 32-byte Ed25519 seed, base64 or hex (`HCPFLOW_AUDIT_SIGNING_KEY`).
    pub fn from_text(text: &str) -> Result<Self, CheckpointError> {
        let seed = decode_32(text.trim()).ok_or_else(|| {
            CheckpointError::BadSigningKey(format!("{} characters", text.trim().len()))
        })?;
        let pair = Ed25519KeyPair::from_seed_unchecked(&seed)
            .map_err(|e| CheckpointError::BadSigningKey(e.to_string()))?;
        let mut public = [0; 32];
        public.copy_from_slice(pair.public_key().as_ref());
        Ok(Self {
            pair,
            public: AuditPublicKey(public),
        })
    }

    pub fn public_key(&self) -> &AuditPublicKey {
        &self.public
    }

    pub fn sign(&self, workflow_id: &WorkflowId, seq: Seq, head_hash: ChainHash) -> Checkpoint {
        let message = Checkpoint::message(workflow_id, seq, &head_hash);
        Checkpoint {
            workflow_id: workflow_id.clone(),
            seq,
            head_hash,
            key_id: self.public.key_id(),
            signature: self.pair.sign(message.as_bytes()).as_ref().to_vec(),
        }
    }
}

/// The public audit key: what an auditor needs to check checkpoints and exports.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct AuditPublicKey([u8; 32]);

impl fmt::Debug for AuditPublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AuditPublicKey({})", self.to_base64())
    }
}

impl AuditPublicKey {
    /// From 32 bytes, base64 or hex.
    pub fn from_text(text: &str) -> Result<Self, CheckpointError> {
        decode_32(text.trim())
            .map(AuditPublicKey)
            .ok_or_else(|| CheckpointError::BadPublicKey(text.trim().to_owned()))
    }

    pub fn to_base64(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(self.0)
    }

    pub fn key_id(&self) -> String {
        hex::encode(&Sha256::digest(self.0)[..8])
    }

    /// Checks that this key signed `checkpoint` as it stands.
    pub fn verify(&self, checkpoint: &Checkpoint) -> Result<(), CheckpointError> {
        if checkpoint.key_id != self.key_id() {
            return Err(CheckpointError::OtherKey {
                expected: self.key_id(),
                found: checkpoint.key_id.clone(),
            });
        }
        let message = Checkpoint::message(
            &checkpoint.workflow_id,
            checkpoint.seq,
            &checkpoint.head_hash,
        );
        UnparsedPublicKey::new(&signature::ED25519, self.0)
            .verify(message.as_bytes(), &checkpoint.signature)
            .map_err(|_| CheckpointError::BadSignature)
    }
}

fn decode_32(text: &str) -> Option<[u8; 32]> {
    let bytes = if text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
        hex::decode(text).ok()?
    } else {
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .ok()?
    };
    <[u8; 32]>::try_from(bytes.as_slice()).ok()
}

mod hex_bytes {
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&hex::encode(bytes))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        hex::decode(text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEED: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

    #[test]
    fn a_checkpoint_verifies_and_any_change_is_caught() {
        let key = AuditSigningKey::from_text(SEED).unwrap();
        let id = WorkflowId::new("wf-1").unwrap();
        let head = ChainHash::GENESIS.next(b"event");
        let checkpoint = key.sign(&id, Seq::new(7).unwrap(), head);
        let public = AuditPublicKey::from_text(&key.public_key().to_base64()).unwrap();
        public.verify(&checkpoint).unwrap();

        let mut later = checkpoint.clone();
        later.seq = Seq::new(6).unwrap();
        assert_eq!(public.verify(&later), Err(CheckpointError::BadSignature));
        let mut rewritten = checkpoint.clone();
        rewritten.head_hash = ChainHash::GENESIS;
        assert_eq!(
            public.verify(&rewritten),
            Err(CheckpointError::BadSignature)
        );
        let mut other = checkpoint.clone();
        other.workflow_id = WorkflowId::new("wf-2").unwrap();
        assert_eq!(public.verify(&other), Err(CheckpointError::BadSignature));

        let stranger = AuditSigningKey::from_text(&"11".repeat(32)).unwrap();
        assert!(matches!(
            stranger.public_key().verify(&checkpoint),
            Err(CheckpointError::OtherKey { .. })
        ));
        let json = serde_json::to_string(&checkpoint).unwrap();
        assert_eq!(
            serde_json::from_str::<Checkpoint>(&json).unwrap(),
            checkpoint
        );
    }

    #[test]
    fn bad_keys_are_refused_with_a_reason() {
        assert!(matches!(
            AuditSigningKey::from_text("short"),
            Err(CheckpointError::BadSigningKey(_))
        ));
        assert!(AuditPublicKey::from_text("zz").is_err());
    }
}
