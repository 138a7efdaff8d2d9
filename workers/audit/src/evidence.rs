//! Judging a history's evidence (the `verify` API reply) against the audit public key:
//! the chain, the signed checkpoints in Postgres and on the witness stream, and whether
//! the history still ends where it was signed. Pure: evidence in, findings out.

use std::collections::BTreeMap;

use hcpflow_engine::{AuditPublicKey, Checkpoint, WorkflowStatus};
use serde::Deserialize;

/// The `verify` reply.
#[derive(Debug, Clone, Deserialize)]
pub struct Evidence {
    pub verified: bool,
    #[serde(default)]
    pub events: Option<u64>,
    #[serde(default)]
    pub first_bad_seq: Option<u64>,
    #[serde(default)]
    pub reason: Option<String>,
    pub status: String,
    pub checkpoints: Checkpoints,
    /// Seq → the history's stored hash there (hex).
    #[serde(default)]
    pub hash_at: BTreeMap<String, String>,
    #[serde(default)]
    pub audit_public_key: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Checkpoints {
    pub database: Option<Checkpoint>,
    pub witness: Option<Checkpoint>,
}

/// What the evidence shows: `problems` fail the audit; `notes` do not.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Findings {
    pub problems: Vec<String>,
    pub notes: Vec<String>,
    /// The seq of the latest valid signed head, if any.
    pub signed_seq: Option<u64>,
}

impl Evidence {
    fn is_terminal(&self) -> bool {
        self.status
            .parse::<WorkflowStatus>()
            .is_ok_and(WorkflowStatus::is_terminal)
    }

    /// Whether the workflow ended and its last event is not signed yet (the checkpointer
    /// signs within a second or two of the end).
    pub fn awaits_final_checkpoint(&self) -> bool {
        let signed = [&self.checkpoints.database, &self.checkpoints.witness]
            .into_iter()
            .flatten()
            .map(|c| c.seq.get())
            .max();
        self.verified && self.is_terminal() && signed < self.events
    }

    pub fn judge(&self, key: &AuditPublicKey) -> Findings {
        let mut findings = Findings::default();
        if !self.verified {
            findings.problems.push(format!(
                "the hash chain is broken at seq {}: {}",
                self.first_bad_seq.unwrap_or_default(),
                self.reason.as_deref().unwrap_or("?")
            ));
        }
        let mut valid = Vec::new();
        for (place, checkpoint) in [
            ("Postgres", &self.checkpoints.database),
            ("the witness stream", &self.checkpoints.witness),
        ] {
            let Some(checkpoint) = checkpoint else {
                continue;
            };
            match key.verify(checkpoint) {
                Ok(()) => valid.push((place, checkpoint)),
                Err(error) => findings.problems.push(format!(
                    "the checkpoint in {place} (seq {}) is not valid: {error}",
                    checkpoint.seq
                )),
            }
        }
        let seq_of = |c: &Option<Checkpoint>| c.as_ref().map(|c| c.seq.get());
        match (
            seq_of(&self.checkpoints.database),
            seq_of(&self.checkpoints.witness),
        ) {
            (None, None) if self.is_terminal() => findings.problems.push(
                "the history is not signed: no checkpoint in Postgres nor on the witness stream"
                    .to_owned(),
            ),
            (None, None) => findings
                .notes
                .push("not signed yet (a running workflow is signed periodically)".to_owned()),
            (database, Some(witness)) if database.is_none_or(|d| d < witness) => {
                findings.problems.push(format!(
                    "Postgres's latest checkpoint ({}) is behind the witness stream's (seq {witness}): checkpoints were removed from Postgres",
                    database.map_or("none".to_owned(), |d| format!("seq {d}"))
                ))
            }
            (Some(database), witness) if witness.is_none_or(|w| w < database) => {
                findings.notes.push(format!(
                    "the witness stream has {} (Postgres: seq {database}); it catches up when the relay publishes",
                    witness.map_or("no checkpoint yet".to_owned(), |w| format!("seq {w}"))
                ))
            }
            _ => {}
        }
        let Some((_, head)) = valid.iter().max_by_key(|(_, c)| c.seq) else {
            return findings;
        };
        findings.signed_seq = Some(head.seq.get());
        if !self.verified {
            return findings;
        }
        let events = self.events.unwrap_or_default();
        let signed = head.seq.get();
        if signed > events {
            findings.problems.push(format!(
                "the history was truncated: it was signed at seq {signed}, it now ends at seq {events}"
            ));
        } else if self.hash_at.get(&signed.to_string()) != Some(&head.head_hash.to_hex()) {
            findings.problems.push(format!(
                "the chain was rewritten: the signed head at seq {signed} is {}, the history's hash there is {}",
                head.head_hash,
                self.hash_at
                    .get(&signed.to_string())
                    .map_or("missing", String::as_str)
            ));
        } else if events > signed && self.is_terminal() {
            findings.problems.push(format!(
                "{} event(s) after the final signed head, from seq {}: appended behind the engine's back",
                events - signed,
                signed + 1
            ));
        } else if events > signed {
            findings.notes.push(format!(
                "signed up to seq {signed}; {} event(s) since, signed at the next checkpoint",
                events - signed
            ));
        }
        findings
    }
}

#[cfg(test)]
mod tests {
    use hcpflow_engine::{AuditSigningKey, ChainHash, Seq, WorkflowId};

    use super::*;

    fn key() -> AuditSigningKey {
        AuditSigningKey::from_text(&"07".repeat(32)).unwrap()
    }

    /// A 5-event history, completed, signed at `signed` in both places.
    fn evidence(signed: u64) -> (Evidence, Vec<ChainHash>) {
        let mut hashes = vec![ChainHash::GENESIS];
        for n in 1..=5u8 {
            let next = hashes[hashes.len() - 1].next(&[n]);
            hashes.push(next);
        }
        let id = WorkflowId::new("wf").unwrap();
        let checkpoint = key().sign(&id, Seq::new(signed).unwrap(), hashes[signed as usize]);
        let hash_at = BTreeMap::from([(signed.to_string(), hashes[signed as usize].to_hex())]);
        (
            Evidence {
                verified: true,
                events: Some(5),
                first_bad_seq: None,
                reason: None,
                status: "completed".into(),
                checkpoints: Checkpoints {
                    database: Some(checkpoint.clone()),
                    witness: Some(checkpoint),
                },
                hash_at,
                audit_public_key: None,
            },
            hashes,
        )
    }

    #[test]
    fn a_signed_history_passes() {
        let (evidence, _) = evidence(5);
        let findings = evidence.judge(key().public_key());
        assert_eq!(findings.problems, Vec::<String>::new());
        assert_eq!(findings.signed_seq, Some(5));
        assert!(!evidence.awaits_final_checkpoint());
    }

    #[test]
    fn truncation_rewrites_appends_and_removed_checkpoints_are_named() {
        let (mut truncated, _) = evidence(5);
        truncated.events = Some(4);
        truncated.hash_at.clear();
        assert!(truncated.judge(key().public_key()).problems[0].contains("truncated"));

        let (mut rewritten, hashes) = evidence(5);
        rewritten.hash_at.insert("5".into(), hashes[1].to_hex());
        assert!(rewritten.judge(key().public_key()).problems[0].contains("rewritten"));

        let (appended, _) = evidence(4);
        let problems = appended.judge(key().public_key()).problems;
        assert!(problems[0].contains("from seq 5"), "{problems:?}");
        let (mut running, _) = evidence(4);
        running.status = "running".into();
        let findings = running.judge(key().public_key());
        assert!(findings.problems.is_empty() && findings.notes[0].contains("since"));

        let (mut removed, _) = evidence(5);
        removed.checkpoints.database = None;
        assert!(removed.judge(key().public_key()).problems[0].contains("removed from Postgres"));

        let (mut forged, _) = evidence(5);
        if let Some(c) = forged.checkpoints.database.as_mut() {
            c.signature[0] ^= 1;
        }
        assert!(forged.judge(key().public_key()).problems[0].contains("not valid"));

        let (mut broken, _) = evidence(5);
        broken.verified = false;
        broken.first_bad_seq = Some(3);
        broken.reason = Some("stored bytes do not hash to the stored hash".into());
        assert!(broken.judge(key().public_key()).problems[0].contains("seq 3"));

        let (mut unsigned, _) = evidence(5);
        unsigned.checkpoints = Checkpoints {
            database: None,
            witness: None,
        };
        assert!(unsigned.awaits_final_checkpoint());
        assert!(unsigned.judge(key().public_key()).problems[0].contains("not signed"));
    }
}
