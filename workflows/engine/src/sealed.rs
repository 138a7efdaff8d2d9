//! Secrets in history: [`Sealed<T>`] holds AEAD ciphertext, never plaintext.
//!
//! A secret is sealed once — at API intake for submitted secrets, inside the activity
//! that generates it otherwise — and from then on travels as the same bytes: through
//! workflow inputs, activity requests and results, events, NATS messages. Replay
//! therefore compares identical bytes. Workflow code has no [`Keyring`], so it can pass
//! a sealed value along but never open it; only the activity that needs the plaintext
//! does.
//!
//! Wire form (a JSON string): `sealed:v1:<key id>:<base64url(nonce ‖ ciphertext)>`,
//! ChaCha20-Poly1305 with the key id as associated data. The key id selects the key on
//! open, so keys can be rotated: seal with the newest, open with any still listed.

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

const PREFIX: &str = "sealed:v1:";
const NONCE_LEN: usize = 12;

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
        format!(
            "{PREFIX}{}:{}",
            self.key_id,
            URL_SAFE_NO_PAD.encode(&self.bytes)
        )
    }

    pub fn from_wire(text: &str) -> Result<Self, SealError> {
        let malformed = || {
            SealError::Malformed(format!(
                "{} characters not of the form {PREFIX}<key id>:<data>",
                text.len()
            ))
        };
        let rest = text.strip_prefix(PREFIX).ok_or_else(malformed)?;
        let (key_id, data) = rest.split_once(':').ok_or_else(malformed)?;
        let bytes = URL_SAFE_NO_PAD.decode(data).map_err(|_| malformed())?;
        if key_id.is_empty() || bytes.len() < NONCE_LEN + 16 {
            return Err(malformed());
        }
        Ok(Self {
            key_id: key_id.to_owned(),
            bytes,
            _type: PhantomData,
        })
    }
}

impl<T> Clone for Sealed<T> {
    fn clone(&self) -> Self {
        Self {
            key_id: self.key_id.clone(),
            bytes: self.bytes.clone(),
            _type: PhantomData,
        }
    }
}

impl<T> PartialEq for Sealed<T> {
    fn eq(&self, other: &Self) -> bool {
        self.key_id == other.key_id && self.bytes == other.bytes
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

/// The seal keys: the first seals, all of them open. `Debug` shows only key ids.
pub struct Keyring {
    keys: Vec<SealKey>,
    /// Derived from the active key: makes digests of secret-bearing inputs unguessable.
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
            let raw = STANDARD
                .decode(encoded)
                .or_else(|_| URL_SAFE_NO_PAD.decode(encoded))
                .map_err(|_| invalid("key is not base64"))?;
            if raw.len() != 32 {
                return Err(invalid("key must be 32 bytes"));
            }
            if keys.iter().any(|k: &SealKey| k.id == id) {
                return Err(invalid("duplicate key id"));
            }
            if keys.is_empty() {
                let mut hasher = Sha256::new();
                hasher.update(b"hcpflow digest key\0");
                hasher.update(&raw);
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

    /// A keyed SHA-256 (hex) of `data`: equal inputs give equal digests, but nobody
    /// without the key can test a guess of a secret against it.
    pub fn keyed_digest(&self, data: &[u8]) -> String {
        let mut hasher = Sha256::new();
        hasher.update(self.digest_key);
        hasher.update(data);
        hex::encode(hasher.finalize())
    }

    /// The id new seals are made with.
    pub fn active_key_id(&self) -> &str {
        &self.keys[0].id
    }

    /// Seals `value` with the active key and a fresh random nonce.
    pub fn seal<T: Serialize>(&self, value: &T) -> Result<Sealed<T>, SealError> {
        let key = &self.keys[0];
        let plaintext = canonical::to_vec_of(value).map_err(|e| SealError::Type(e.to_string()))?;
        let nonce = ChaCha20Poly1305::generate_nonce(&mut OsRng);
        let ciphertext = key
            .cipher
            .encrypt(
                &nonce,
                Payload {
                    msg: &plaintext,
                    aad: key.id.as_bytes(),
                },
            )
            .map_err(|_| SealError::Tampered(key.id.clone()))?;
        let mut bytes = nonce.to_vec();
        bytes.extend_from_slice(&ciphertext);
        Ok(Sealed {
            key_id: key.id.clone(),
            bytes,
            _type: PhantomData,
        })
    }

    /// Opens a sealed value with the key its id names.
    pub fn open<T: DeserializeOwned>(&self, sealed: &Sealed<T>) -> Result<T, SealError> {
        let key = self
            .keys
            .iter()
            .find(|k| k.id == sealed.key_id)
            .ok_or_else(|| SealError::UnknownKey(sealed.key_id.clone()))?;
        let (nonce, ciphertext) = sealed.bytes.split_at(NONCE_LEN);
        let plaintext = key
            .cipher
            .decrypt(
                Nonce::from_slice(nonce),
                Payload {
                    msg: ciphertext,
                    aad: key.id.as_bytes(),
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

    #[test]
    fn seal_open_round_trip_and_wire_form() {
        let ring = Keyring::parse(KEY_A).unwrap();
        let sealed = ring.seal(&"pull-secret-canary".to_owned()).unwrap();
        let json = serde_json::to_string(&sealed).unwrap();
        assert!(json.starts_with("\"sealed:v1:a:"), "{json}");
        assert!(!json.contains("canary"));
        assert!(!format!("{sealed:?}").contains("canary"));
        let back: Sealed<String> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, sealed);
        assert_eq!(ring.open(&back).unwrap(), "pull-secret-canary");
    }

    #[test]
    fn rotation_opens_old_seals_and_seals_with_the_new_key() {
        let old = Keyring::parse(KEY_A).unwrap();
        let sealed = old.seal(&42u32).unwrap();
        let rotated = Keyring::parse(&format!("{KEY_B},{KEY_A}")).unwrap();
        assert_eq!(rotated.open(&sealed).unwrap(), 42);
        assert_eq!(rotated.seal(&1u32).unwrap().key_id(), "b");
        let only_new = Keyring::parse(KEY_B).unwrap();
        assert_eq!(
            only_new.open(&sealed),
            Err(SealError::UnknownKey("a".into()))
        );
    }

    #[test]
    fn altered_bytes_or_key_id_do_not_open() {
        let ring = Keyring::parse(&format!("{KEY_A},{KEY_B}")).unwrap();
        let sealed = ring.seal(&"x".to_owned()).unwrap();
        let mut wire = sealed.to_wire().into_bytes();
        let last = wire.len() - 2;
        wire[last] = if wire[last] == b'A' { b'B' } else { b'A' };
        let altered: Sealed<String> =
            Sealed::from_wire(std::str::from_utf8(&wire).unwrap()).unwrap();
        assert!(matches!(ring.open(&altered), Err(SealError::Tampered(_))));
        let relabelled: Sealed<String> =
            Sealed::from_wire(&sealed.to_wire().replacen(":a:", ":b:", 1)).unwrap();
        assert!(matches!(
            ring.open(&relabelled),
            Err(SealError::Tampered(_))
        ));
    }

    #[test]
    fn bad_key_specs_are_explained() {
        assert!(Keyring::parse("").is_err());
        assert!(Keyring::parse("a:c2hvcnQ=").is_err());
        assert!(Keyring::parse("no-colon").is_err());
        assert!(Keyring::parse(&format!("{KEY_A},{KEY_A}")).is_err());
        assert!(Sealed::<String>::from_wire("plain text").is_err());
    }
}
