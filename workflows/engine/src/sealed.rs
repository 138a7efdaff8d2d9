//! Secrets in history: [`Sealed<T>`] holds AEAD ciphertext, never plaintext.
//!
//! A secret is sealed once — at API intake for submitted secrets, inside the activity
//! that generates it otherwise — and from then on travels as the same bytes: through
//! workflow inputs, activity requests and results, events, NATS messages. Replay
//! therefore compares identical bytes. Workflow code has no [`Keyring`], so it can pass
//! a sealed value along but never open it; only the activity that needs the plaintext
//! does.
//!
//! Wire form (a JSON string): `sealed:v2:<key id>:<base64url(nonce ‖ ciphertext)>`,
//! ChaCha20-Poly1305. The key id selects the key on open, so keys can be rotated: seal
//! with the newest, open with any still listed.
//!
//! A value is bound to its place — the workflow it was sealed for and what it is there
//! (a [`Binding`]) — through the associated data: the same bytes copied into another
//! workflow's input, or into another field, do not open. (Values of the first version,
//! `sealed:v1:`, bound to the key id only, still open where histories hold them.)

use std::fmt;
use std::marker::PhantomData;

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use chacha20poly1305::aead::{Aead, AeadCore, KeyInit, OsRng, Payload};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::canonical;
use crate::ids::WorkflowId;

const PREFIX_V1: &str = "sealed:v1:";
const PREFIX_V2: &str = "sealed:v2:";
const NONCE_LEN: usize = 12;

/// Where a sealed value belongs: the workflow it was sealed for, and what it is there
/// (`input/pull_secret` for a field of the start input, or an activity's own name for
/// what it generates). Sealer and opener name the same binding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Binding<'a> {
    pub workflow_id: &'a WorkflowId,
    pub purpose: &'a str,
}

impl<'a> Binding<'a> {
    pub fn new(workflow_id: &'a WorkflowId, purpose: &'a str) -> Self {
        Self {
            workflow_id,
            purpose,
        }
    }

    /// The associated data of a value sealed with `key_id` for this binding.
    fn associated_data(&self, key_id: &str) -> Vec<u8> {
        let mut data = b"hcpflow-sealed-v2\0".to_vec();
        for part in [key_id, self.workflow_id.as_str(), self.purpose] {
            data.extend_from_slice(part.as_bytes());
            data.push(0);
        }
        data
    }
}

/// The purpose of a secret field of a workflow's start input, by its JSON pointer
/// (`/pull_secret` → `input/pull_secret`): what intake seals it for.
pub fn input_purpose(pointer: &str) -> String {
    format!("input{pointer}")
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    #[error("seal keys must be `<key id>:<base64 of 32 bytes>` separated by commas: {0}")]
    InvalidKeySpec(String),
    #[error("no seal key with id {0:?} is configured")]
    UnknownKey(String),
    #[error("not a sealed value: {0}")]
    Malformed(String),
    #[error("sealed value does not open with key {0:?}: wrong key or altered bytes")]
    Tampered(String),
    #[error("sealed plaintext does not match its type: {0}")]
    Type(String),
}

/// A `T` sealed with a key of the [`Keyring`]. `Debug` never shows the secret; there is
/// no `Display`.
pub struct Sealed<T> {
    /// 1: bound to the key id only; 2: bound to a [`Binding`].
    version: u8,
    key_id: String,
    /// Nonce followed by ciphertext and tag.
    bytes: Vec<u8>,
    _type: PhantomData<fn() -> T>,
}

impl<T> Sealed<T> {
    pub fn key_id(&self) -> &str {
        &self.key_id
    }

    /// The wire form, e.g. to store outside JSON.
    pub fn to_wire(&self) -> String {
        let prefix = if self.version == 1 {
            PREFIX_V1
        } else {
            PREFIX_V2
        };
        format!(
            "{prefix}{}:{}",
            self.key_id,
            URL_SAFE_NO_PAD.encode(&self.bytes)
        )
    }

    /// True for text in a sealed value's wire form (of any version).
    pub fn looks_sealed(text: &str) -> bool {
        text.starts_with(PREFIX_V1) || text.starts_with(PREFIX_V2)
    }

    pub fn from_wire(text: &str) -> Result<Self, SealError> {
        let malformed = || {
            SealError::Malformed(format!(
                "{} characters not of the form {PREFIX_V2}<key id>:<data>",
                text.len()
            ))
        };
        let (version, rest) = match text.strip_prefix(PREFIX_V2) {
            Some(rest) => (2, rest),
            None => (1, text.strip_prefix(PREFIX_V1).ok_or_else(malformed)?),
        };
        let (key_id, data) = rest.split_once(':').ok_or_else(malformed)?;
        let bytes = URL_SAFE_NO_PAD.decode(data).map_err(|_| malformed())?;
        if key_id.is_empty() || bytes.len() < NONCE_LEN + 16 {
            return Err(malformed());
        }
        Ok(Self {
            version,
            key_id: key_id.to_owned(),
            bytes,
            _type: PhantomData,
        })
    }
}

impl<T> Clone for Sealed<T> {
    fn clone(&self) -> Self {
        Self {
            version: self.version,
            key_id: self.key_id.clone(),
            bytes: self.bytes.clone(),
            _type: PhantomData,
        }
    }
}

impl<T> PartialEq for Sealed<T> {
    fn eq(&self, other: &Self) -> bool {
        self.version == other.version && self.key_id == other.key_id && self.bytes == other.bytes
    }
}

impl<T> Eq for Sealed<T> {}

impl<T> fmt::Debug for Sealed<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Sealed(key {}, {} bytes)", self.key_id, self.bytes.len())
    }
}

impl<T> Serialize for Sealed<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_wire())
    }
}

impl<'de, T> Deserialize<'de> for Sealed<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Self::from_wire(&text).map_err(serde::de::Error::custom)
    }
}

struct SealKey {
    id: String,
    cipher: ChaCha20Poly1305,
}

/// A key's 32 bytes from base64 (standard, or URL-safe without padding).
fn key_bytes(encoded: &str) -> Result<[u8; 32], &'static str> {
    let raw = STANDARD
        .decode(encoded)
        .or_else(|_| URL_SAFE_NO_PAD.decode(encoded))
        .map_err(|_| "key is not base64")?;
    raw.try_into().map_err(|_| "key must be 32 bytes")
}

/// The seal keys: the first seals, all of them open. `Debug` shows only key ids.
pub struct Keyring {
    keys: Vec<SealKey>,
    /// Makes digests of secret-bearing inputs unguessable: its own key when configured,
    /// else derived from the active seal key (then a rotation changes every digest).
    digest_key: [u8; 32],
}

impl fmt::Debug for Keyring {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ids: Vec<&str> = self.keys.iter().map(|k| k.id.as_str()).collect();
        write!(f, "Keyring(keys {ids:?})")
    }
}

impl Keyring {
    /// Parses `HCPFLOW_SEAL_KEY`: `<id>:<base64 of 32 bytes>`, optionally followed by
    /// `,<id>:<base64>` for older keys that must still open.
    pub fn parse(spec: &str) -> Result<Self, SealError> {
        let mut keys = Vec::new();
        let mut digest_key = [0u8; 32];
        for (index, entry) in spec.split(',').map(str::trim).enumerate() {
            let invalid =
                |why: &str| SealError::InvalidKeySpec(format!("entry {}: {why}", index + 1));
            let (id, encoded) = entry
                .split_once(':')
                .ok_or_else(|| invalid("missing ':'"))?;
            if id.is_empty()
                || !id
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            {
                return Err(invalid("key id must be [A-Za-z0-9_-]+"));
            }
            let raw = key_bytes(encoded).map_err(&invalid)?;
            if keys.iter().any(|k: &SealKey| k.id == id) {
                return Err(invalid("duplicate key id"));
            }
            if keys.is_empty() {
                let mut hasher = Sha256::new();
                hasher.update(b"hcpflow digest key\0");
                hasher.update(raw);
                digest_key = hasher.finalize().into();
            }
            keys.push(SealKey {
                id: id.to_owned(),
                cipher: ChaCha20Poly1305::new(Key::from_slice(&raw)),
            });
        }
        if keys.is_empty() {
            return Err(SealError::InvalidKeySpec("no keys".into()));
        }
        Ok(Self { keys, digest_key })
    }

    /// Keys input digests with `key` (32 bytes, base64) instead of the active seal key,
    /// so that a rotation of the seal keys leaves every digest as it was.
    pub fn with_digest_key(mut self, key: &str) -> Result<Self, SealError> {
        self.digest_key = key_bytes(key.trim())
            .map_err(|why| SealError::InvalidKeySpec(format!("the input digest {why}")))?;
        Ok(self)
    }

    /// A keyed SHA-256 (hex) of `data`: equal inputs give equal digests, but nobody
    /// without the key can test a guess of a secret against it.
    pub fn keyed_digest(&self, data: &[u8]) -> String {
        let mut hasher = Sha256::new();
        hasher.update(self.digest_key);
        hasher.update(data);
        crate::lower_hex::lower_hex(&hasher.finalize())
    }

    /// The id new seals are made with.
    pub fn active_key_id(&self) -> &str {
        &self.keys[0].id
    }

    /// Every configured key id, the active one first.
    pub fn key_ids(&self) -> impl Iterator<Item = &str> {
        self.keys.iter().map(|key| key.id.as_str())
    }

    /// Seals `value` for `binding` with the active key and a fresh random nonce.
    pub fn seal<T: Serialize>(
        &self,
        value: &T,
        binding: &Binding<'_>,
    ) -> Result<Sealed<T>, SealError> {
        self.seal_with(&self.keys[0], value, binding)
    }

    /// Seals with the key `key_id` names, active or not: the start-up check seals a
    /// known value with each key.
    pub fn seal_with_key<T: Serialize>(
        &self,
        key_id: &str,
        value: &T,
        binding: &Binding<'_>,
    ) -> Result<Sealed<T>, SealError> {
        let key = self
            .keys
            .iter()
            .find(|key| key.id == key_id)
            .ok_or_else(|| SealError::UnknownKey(key_id.to_owned()))?;
        self.seal_with(key, value, binding)
    }

    fn seal_with<T: Serialize>(
        &self,
        key: &SealKey,
        value: &T,
        binding: &Binding<'_>,
    ) -> Result<Sealed<T>, SealError> {
        let plaintext = canonical::to_vec_of(value).map_err(|e| SealError::Type(e.to_string()))?;
        let nonce = ChaCha20Poly1305::generate_nonce(&mut OsRng);
        let ciphertext = key
            .cipher
            .encrypt(
                &nonce,
                Payload {
                    msg: &plaintext,
                    aad: &binding.associated_data(&key.id),
                },
            )
            .map_err(|_| SealError::Tampered(key.id.clone()))?;
        let mut bytes = nonce.to_vec();
        bytes.extend_from_slice(&ciphertext);
        Ok(Sealed {
            version: 2,
            key_id: key.id.clone(),
            bytes,
            _type: PhantomData,
        })
    }

    /// Opens a value sealed for `binding`, with the key its id names. A value sealed
    /// for another workflow or another purpose does not open (`Tampered`).
    pub fn open<T: DeserializeOwned>(
        &self,
        sealed: &Sealed<T>,
        binding: &Binding<'_>,
    ) -> Result<T, SealError> {
        let key = self
            .keys
            .iter()
            .find(|k| k.id == sealed.key_id)
            .ok_or_else(|| SealError::UnknownKey(sealed.key_id.clone()))?;
        let aad = match sealed.version {
            1 => key.id.as_bytes().to_vec(),
            _ => binding.associated_data(&key.id),
        };
        let (nonce, ciphertext) = sealed.bytes.split_at(NONCE_LEN);
        let plaintext = key
            .cipher
            .decrypt(
                Nonce::from_slice(nonce),
                Payload {
                    msg: ciphertext,
                    aad: &aad,
                },
            )
            .map_err(|_| SealError::Tampered(key.id.clone()))?;
        serde_json::from_slice(&plaintext).map_err(|e| SealError::Type(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY_A: &str = "a:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
    const KEY_B: &str = "b:HxwdHh8AAQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRo=";

    fn workflow(id: &str) -> WorkflowId {
        WorkflowId::new(id).unwrap()
    }

    #[test]
    fn seal_open_round_trip_and_wire_form() {
        let ring = Keyring::parse(KEY_A).unwrap();
        let id = workflow("create-demo");
        let here = Binding::new(&id, "input/pull_secret");
        let sealed = ring.seal(&"pull-secret-canary".to_owned(), &here).unwrap();
        let json = serde_json::to_string(&sealed).unwrap();
        assert!(json.starts_with("\"sealed:v2:a:"), "{json}");
        assert!(!json.contains("canary"));
        assert!(!format!("{sealed:?}").contains("canary"));
        let back: Sealed<String> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, sealed);
        assert_eq!(ring.open(&back, &here).unwrap(), "pull-secret-canary");
    }

    #[test]
    fn a_value_opens_only_in_its_own_workflow_and_field() {
        let ring = Keyring::parse(KEY_A).unwrap();
        let (own, other) = (workflow("create-a"), workflow("create-b"));
        let sealed = ring
            .seal(
                &"a's secret".to_owned(),
                &Binding::new(&own, "input/pull_secret"),
            )
            .unwrap();
        // Copied from a's history into b's input: it does not open there.
        assert!(matches!(
            ring.open(&sealed, &Binding::new(&other, "input/pull_secret")),
            Err(SealError::Tampered(_))
        ));
        // Nor in another field of a's own workflow.
        assert!(matches!(
            ring.open(&sealed, &Binding::new(&own, "oidc-signing-key")),
            Err(SealError::Tampered(_))
        ));
    }

    #[test]
    fn a_first_version_value_still_opens() {
        let ring = Keyring::parse(KEY_A).unwrap();
        let key = &ring.keys[0];
        let nonce = ChaCha20Poly1305::generate_nonce(&mut OsRng);
        let ciphertext = key
            .cipher
            .encrypt(
                &nonce,
                Payload {
                    msg: b"\"old\"",
                    aad: b"a",
                },
            )
            .unwrap();
        let mut bytes = nonce.to_vec();
        bytes.extend_from_slice(&ciphertext);
        let wire = format!("{PREFIX_V1}a:{}", URL_SAFE_NO_PAD.encode(&bytes));
        assert!(Sealed::<String>::looks_sealed(&wire));
        let old: Sealed<String> = Sealed::from_wire(&wire).unwrap();
        assert_eq!(old.to_wire(), wire, "its bytes stay as recorded");
        let id = workflow("create-old");
        assert_eq!(
            ring.open(&old, &Binding::new(&id, "input/pull_secret"))
                .unwrap(),
            "old"
        );
    }

    #[test]
    fn rotation_opens_old_seals_and_seals_with_the_new_key() {
        let id = workflow("w");
        let here = Binding::new(&id, "p");
        let old = Keyring::parse(KEY_A).unwrap();
        let sealed = old.seal(&42u32, &here).unwrap();
        let rotated = Keyring::parse(&format!("{KEY_B},{KEY_A}")).unwrap();
        assert_eq!(rotated.open(&sealed, &here).unwrap(), 42);
        assert_eq!(rotated.seal(&1u32, &here).unwrap().key_id(), "b");
        let only_new = Keyring::parse(KEY_B).unwrap();
        assert_eq!(
            only_new.open(&sealed, &here),
            Err(SealError::UnknownKey("a".into()))
        );
    }

    #[test]
    fn altered_bytes_or_key_id_do_not_open() {
        let id = workflow("w");
        let here = Binding::new(&id, "p");
        let ring = Keyring::parse(&format!("{KEY_A},{KEY_B}")).unwrap();
        let sealed = ring.seal(&"x".to_owned(), &here).unwrap();
        let mut wire = sealed.to_wire().into_bytes();
        let last = wire.len() - 2;
        wire[last] = if wire[last] == b'A' { b'B' } else { b'A' };
        let altered: Sealed<String> =
            Sealed::from_wire(std::str::from_utf8(&wire).unwrap()).unwrap();
        assert!(matches!(
            ring.open(&altered, &here),
            Err(SealError::Tampered(_))
        ));
        let relabelled: Sealed<String> =
            Sealed::from_wire(&sealed.to_wire().replacen(":a:", ":b:", 1)).unwrap();
        assert!(matches!(
            ring.open(&relabelled, &here),
            Err(SealError::Tampered(_))
        ));
    }
}
