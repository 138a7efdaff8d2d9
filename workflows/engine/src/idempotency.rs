//! The idempotency key of an activity execution.

use std::fmt;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::ids::{Seq, WorkflowId};

/// Stable across retries, crashes and replays of one activity execution: derived from
/// the workflow id and the seq of its `ActivityScheduled` event only.
///
/// At most 64 ASCII characters of `[a-z0-9-]`, so it is valid as an AWS `ClientToken`,
/// a Route53 `CallerReference` and a tag value: `hf-` + 40 hex digits of SHA-256 over
/// `workflow_id ":" seq`, + `-` + seq.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    pub const MAX_LEN: usize = 64;

    pub fn for_activity(workflow_id: &WorkflowId, seq: Seq) -> Self {
        let digest = Sha256::digest(format!("{workflow_id}:{seq}").as_bytes());
        let key = format!("hf-{}-{seq}", &crate::lower_hex::lower_hex(&digest)[..40]);
        debug_assert!(key.len() <= Self::MAX_LEN);
        Self(key)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for IdempotencyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stable_short_ascii_and_distinct() {
        let long = WorkflowId::new("w".repeat(128)).unwrap();
        let seq = Seq::new(u64::MAX).unwrap();
        let key = IdempotencyKey::for_activity(&long, seq);
        assert!(key.as_str().len() <= IdempotencyKey::MAX_LEN, "{key}");
        assert!(key
            .as_str()
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'));
        assert_eq!(key, IdempotencyKey::for_activity(&long, seq));
        let short = WorkflowId::new("w").unwrap();
        assert_ne!(
            IdempotencyKey::for_activity(&short, Seq::new(2).unwrap()),
            IdempotencyKey::for_activity(&short, Seq::new(3).unwrap())
        );
    }
}
