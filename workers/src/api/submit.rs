//! Durable fire-and-forget submission on `<prefix>.submit.v1.start` (stream
//! `<PREFIX>_SUBMIT`). Accepted starts show up on the events subject; rejects go to the
//! dead-letter stream as `{"reason", "code", "subject", "received_at", "body_redacted"}`.

use std::sync::Arc;

use async_nats::jetstream;
use hcpflow_engine::WorkflowId;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use tokio::sync::watch;

use crate::api::fields::Fields;
use crate::api::intake::{Intake, StartVerb};
use crate::runtime::nats::Deliveries;
use hcpflow_protocol::{parse_body, ApiError, ErrorCode, StartRequest};

#[derive(Debug, Clone)]
pub struct Submissions {
    pub intake: Arc<Intake>,
    pub max_body_bytes: usize,
}

impl Submissions {
    pub async fn run(
        self,
        consumer: async_nats::jetstream::consumer::PullConsumer,
        mut shutdown: watch::Receiver<bool>,
    ) -> anyhow::Result<()> {
        let mut deliveries = Deliveries::new(consumer, "submissions");
        while let Some(message) = deliveries.next(&mut shutdown).await {
            match self.accept(&message).await {
                Ok(()) => {
                    let _ = message.ack().await;
                }
                Err(error)
                    if matches!(error.code, ErrorCode::Unavailable | ErrorCode::Internal) =>
                {
                    tracing::warn!(%error, "submission not recorded; NATS will redeliver it");
                    let _ = message
                        .ack_with(async_nats::jetstream::AckKind::Nak(Some(
                            std::time::Duration::from_secs(1),
                        )))
                        .await;
                }
                Err(error) => {
                    if let Err(dlq) = self
                        .dead_letter(&message.subject, &message.payload, &error)
                        .await
                    {
                        tracing::warn!(%dlq, "dead-lettering failed; NATS will redeliver");
                        continue;
                    }
                    let _ = message.ack().await;
                }
            }
        }
        Ok(())
    }

    async fn accept(&self, message: &jetstream::Message) -> Result<(), ApiError> {
        let map = parse_body(&message.payload, self.max_body_bytes)?;
        let mut request = Fields(map).read::<StartRequest>()?;
        if request.workflow_id.is_none() {
            request.workflow_id = submission_id(message);
        }
        let tenant = self
            .intake
            .journal
            .outgoing
            .subjects
            .submit_tenant(&message.subject)
            .map_err(|error| ApiError::invalid(format!("the subject's tenant: {error}")))?;
        self.intake
            .start(&tenant, StartVerb::Start, request)
            .await
            .map(|_| ())
    }

    async fn dead_letter(
        &self,
        subject: &str,
        body: &[u8],
        error: &ApiError,
    ) -> anyhow::Result<()> {
        let journal = &self.intake.journal;
        let record = json!({
            "reason": error.message,
            "code": error.code.as_str(),
            "subject": subject,
            "received_at": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            "body_redacted": redact(body),
        });
        journal
            .js
            .publish(
                journal.outgoing.subjects.dead_letter("submit"),
                serde_json::to_vec(&record)?.into(),
            )
            .await?
            .await?;
        journal.metrics.dead_lettered.inc();
        tracing::info!(code = error.code.as_str(), "submission dead-lettered");
        Ok(())
    }
}

/// The body with every string value replaced by its length, so a rejected submission
/// keeps its shape for debugging and none of its contents (secrets included).
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

/// The id of a submission that names none, derived from the message — its
/// `Nats-Msg-Id` when it has one, else its place in the stream — so that a redelivery
/// (the start committed, the ack lost) is the same start, answered `already_started`,
/// instead of a second workflow.
pub fn submission_id(message: &jetstream::Message) -> Option<WorkflowId> {
    let source = match message
        .headers
        .as_ref()
        .and_then(|headers| headers.get(async_nats::header::NATS_MESSAGE_ID))
    {
        Some(msg_id) => format!("msg-id\0{msg_id}"),
        None => {
            let info = message.info().ok()?;
            format!(
                "stream\0{}\0{}\0{}",
                info.stream, info.stream_sequence, info.published
            )
        }
    };
    let digest = hex::encode(Sha256::digest(source.as_bytes()));
    WorkflowId::new(format!("sub-{}", &digest[..32])).ok()
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
