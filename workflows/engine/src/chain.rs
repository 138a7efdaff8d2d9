//! The hash chain over a workflow's history.
//!
//! `hash(seq) = SHA-256(hash(seq - 1) ‖ canonical bytes of event seq)`, and seq 1 chains
//! from [`ChainHash::GENESIS`] (32 zero bytes). Changing, removing or reordering any
//! event changes every hash after it; a signed head (DESIGN.md §7) then also catches
//! truncation and a wholesale rewrite.

use std::fmt;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// A SHA-256 link of the chain.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ChainHash([u8; 32]);

/// The bytes were not 32 bytes (or 64 hex digits) long.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a chain hash is 32 bytes, got {0:?}")]
pub struct InvalidHash(pub String);

impl ChainHash {
    /// What seq 1 chains from.
    pub const GENESIS: ChainHash = ChainHash([0; 32]);

    /// The link after `self` for an event whose canonical bytes are `event_bytes`.
    #[must_use]
    pub fn next(&self, event_bytes: &[u8]) -> ChainHash {
        let mut hasher = Sha256::new();
        hasher.update(self.0);
        hasher.update(event_bytes);
        ChainHash(hasher.finalize().into())
    }

    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    pub fn from_slice(bytes: &[u8]) -> Result<Self, InvalidHash> {
        <[u8; 32]>::try_from(bytes)
            .map(ChainHash)
            .map_err(|_| InvalidHash(hex::encode(bytes)))
    }

    pub fn from_hex(text: &str) -> Result<Self, InvalidHash> {
        let bytes = hex::decode(text).map_err(|_| InvalidHash(text.to_owned()))?;
        Self::from_slice(&bytes)
    }

    pub fn to_hex(&self) -> String {
        crate::lower_hex::lower_hex(&self.0)
    }
}

impl fmt::Display for ChainHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for ChainHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ChainHash({})", self.to_hex())
    }
}

impl Serialize for ChainHash {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_hex())
    }
}

impl<'de> Deserialize<'de> for ChainHash {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Self::from_hex(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn genesis_link_is_sha256_of_zeros_and_bytes() {
        let expected = {
            let mut hasher = Sha256::new();
            hasher.update([0u8; 32]);
            hasher.update(b"{}");
            hex::encode(hasher.finalize())
        };
        assert_eq!(ChainHash::GENESIS.next(b"{}").to_hex(), expected);
    }

    #[test]
    fn any_change_moves_every_later_link() {
        let a = ChainHash::GENESIS.next(b"one").next(b"two");
        let b = ChainHash::GENESIS.next(b"onE").next(b"two");
        assert_ne!(a, b);
    }

    #[test]
    fn hex_round_trip_and_length_check() {
        let link = ChainHash::GENESIS.next(b"x");
        assert_eq!(ChainHash::from_hex(&link.to_hex()), Ok(link));
        assert!(ChainHash::from_slice(&[1, 2, 3]).is_err());
        assert!(ChainHash::from_hex("zz").is_err());
    }
}
