//! The dead-letter stream: where a message that can never be processed is recorded
//! (redacted) before it is acknowledged, so that nothing is dropped without a trace.

use std::sync::Arc;

use async_nats::jetstream;
use serde_json::{json, Value};

use crate::runtime::metrics::Metrics;
use hcpflow_protocol::Subjects;

/// The source of refused task messages (workflow and activity tasks).
pub const TASKS: &str = "tasks";

/// Records refused messages on `<prefix>.deadletter.<source>`.
#[derive(Debug, Clone)]
pub struct DeadLetters {
    pub js: jetstream::Context,
    /// The dead-letter subject of this source (`submit`, `tasks`, ...).
    pub subject: String,
    pub metrics: Arc<Metrics>,
}

impl DeadLetters {
    pub fn new(
        js: jetstream::Context,
        subjects: &Subjects,
        source: &str,
        metrics: Arc<Metrics>,
    ) -> Self {
        Self {
            js,
            subject: subjects.dead_letter(source),
            metrics,
        }
    }

    /// Records that the message on `subject` with `body` was refused with `code`, for
    /// `reason`; an error when the record is not stored (the caller keeps the message).
    pub async fn record(
        &self,
        subject: &str,
        body: &[u8],
        code: &str,
        reason: &str,
    ) -> anyhow::Result<()> {
        let record = json!({
            "reason": reason,
            "code": code,
            "subject": subject,
            "received_at": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            "body_redacted": redact(body),
        });
        self.js
            .publish(self.subject.clone(), serde_json::to_vec(&record)?.into())
            .await?
            .await?;
        self.metrics.dead_lettered.inc();
        tracing::info!(code, subject, "message dead-lettered");
        Ok(())
    }
}

/// The body with every string value replaced by its length, so a refused message keeps
/// its shape for debugging and none of its contents (secrets included).
pub fn redact(body: &[u8]) -> Value {
    fn strip(value: &Value) -> Value {
        match value {
            Value::String(text) => {
                Value::String(format!("[redacted: {} chars]", text.chars().count()))
            }
            Value::Array(items) => Value::Array(items.iter().map(strip).collect()),
            Value::Object(map) => {
                Value::Object(map.iter().map(|(k, v)| (k.clone(), strip(v))).collect())
            }
            other => other.clone(),
        }
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(value) => strip(&value),
        Err(_) => Value::String(format!("[not JSON: {} bytes]", body.len())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redaction_keeps_shape_and_drops_contents() {
        let body = br#"{"workflow_type": "x", "input": {"pull_secret": "canary", "n": 3}}"#;
        let redacted = redact(body);
        assert_eq!(redacted["input"]["n"], 3);
        assert!(!redacted.to_string().contains("canary"));
        assert_eq!(
            redact(b"\xff not json"),
            Value::String("[not JSON: 10 bytes]".into())
        );
    }
}
