//! Identifier newtypes.
//!
//! A workflow id is one NATS subject token and a Postgres key, so its alphabet is
//! restricted at construction: nothing downstream has to re-check it.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Why a string is not a valid identifier.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    #[error("workflow_id must be 1-128 characters, got {0}")]
    WorkflowIdLength(usize),
    #[error("workflow_id may only contain A-Z, a-z, 0-9, '_' and '-'; found {0:?}")]
    WorkflowIdCharacter(char),
    #[error("seq must be at least 1, got {0}")]
    SeqZero(u64),
    #[error("seq is not a number: {0:?}")]
    SeqNotANumber(String),
    #[error("a tenant is 1-63 characters of a-z, 0-9 and '-', starting with a letter or digit; got {0:?}")]
    Tenant(String),
}

/// A workflow's id: 1–128 characters of `[A-Za-z0-9_-]`, unique forever.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct WorkflowId(String);

impl WorkflowId {
    pub const MAX_LEN: usize = 128;

    /// Validates `id` and wraps it.
    pub fn new(id: impl Into<String>) -> Result<Self, IdError> {
        let id = id.into();
        if id.is_empty() || id.len() > Self::MAX_LEN {
            return Err(IdError::WorkflowIdLength(id.chars().count()));
        }
        if let Some(bad) = id
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
        {
            return Err(IdError::WorkflowIdCharacter(bad));
        }
        Ok(Self(id))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for WorkflowId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for WorkflowId {
    type Err = IdError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::new(s)
    }
}

impl<'de> Deserialize<'de> for WorkflowId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(d)?;
        Self::new(raw).map_err(serde::de::Error::custom)
    }
}

/// Who owns a workflow (and the cluster it provisions): 1–63 characters of `[a-z0-9-]`,
/// starting with a letter or digit — one NATS subject token, so that NATS permissions
/// on `<prefix>.api.v1.<tenant>.>` decide who may act for it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct TenantId(String);

impl TenantId {
    pub const MAX_LEN: usize = 63;
    /// The tenant of the subjects without one (`<prefix>.api.v1.<verb>`), and of every
    /// workflow recorded before tenants existed.
    pub const DEFAULT: &'static str = "default";

    pub fn new(tenant: impl Into<String>) -> Result<Self, IdError> {
        let tenant = tenant.into();
        let valid = !tenant.is_empty()
            && tenant.len() <= Self::MAX_LEN
            && tenant.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
            && tenant
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        if valid {
            Ok(Self(tenant))
        } else {
            Err(IdError::Tenant(tenant))
        }
    }

    pub fn default_tenant() -> Self {
        Self(Self::DEFAULT.to_owned())
    }

    pub fn is_default(&self) -> bool {
        self.0 == Self::DEFAULT
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TenantId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for TenantId {
    type Err = IdError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::new(s)
    }
}

impl<'de> Deserialize<'de> for TenantId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(d)?;
        Self::new(raw).map_err(serde::de::Error::custom)
    }
}

/// A position in one workflow's history. The first event is seq 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct Seq(u64);

impl Seq {
    pub const FIRST: Seq = Seq(1);

    pub fn new(value: u64) -> Result<Self, IdError> {
        if value == 0 {
            return Err(IdError::SeqZero(value));
        }
        Ok(Self(value))
    }

    pub fn get(self) -> u64 {
        self.0
    }

    /// The seq right after this one.
    #[must_use]
    pub fn next(self) -> Seq {
        Seq(self.0 + 1)
    }

    /// The seq `n` positions after this one.
    #[must_use]
    pub fn advance(self, n: u64) -> Seq {
        Seq(self.0 + n)
    }
}

impl fmt::Display for Seq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl FromStr for Seq {
    type Err = IdError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let value: u64 = s
            .parse()
            .map_err(|_| IdError::SeqNotANumber(s.to_owned()))?;
        Self::new(value)
    }
}

impl<'de> Deserialize<'de> for Seq {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Self::new(u64::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenant_is_one_lower_case_subject_token() {
        for good in ["default", "acme", "team-7", "0ps"] {
            assert_eq!(TenantId::new(good).unwrap().as_str(), good);
        }
        for bad in ["", "Acme", "-x", "a.b", "a*", "a>", "a b", &"x".repeat(64)] {
            assert!(TenantId::new(bad).is_err(), "{bad:?}");
        }
        assert!(TenantId::default_tenant().is_default());
    }

    #[test]
    fn workflow_id_alphabet_and_length() {
        assert!(WorkflowId::new("create-demo_01").is_ok());
        assert_eq!(WorkflowId::new(""), Err(IdError::WorkflowIdLength(0)));
        assert_eq!(
            WorkflowId::new("a".repeat(129)),
            Err(IdError::WorkflowIdLength(129))
        );
        assert!(WorkflowId::new("a".repeat(128)).is_ok());
        assert_eq!(
            WorkflowId::new("a.b"),
            Err(IdError::WorkflowIdCharacter('.'))
        );
        assert_eq!(
            WorkflowId::new("a b"),
            Err(IdError::WorkflowIdCharacter(' '))
        );
    }

    #[test]
    fn workflow_id_rejects_invalid_on_deserialize() {
        let parsed: Result<WorkflowId, _> = serde_json::from_str("\"a>b\"");
        assert!(parsed.is_err());
    }

    #[test]
    fn seq_starts_at_one() {
        assert!(Seq::new(0).is_err());
        assert_eq!(Seq::FIRST.next().get(), 2);
        assert_eq!("7".parse::<Seq>().map(Seq::get), Ok(7));
        assert!(serde_json::from_str::<Seq>("0").is_err());
    }
}
