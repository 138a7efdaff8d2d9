//! Durable fire-and-forget submission on `<prefix>.submit.v1.start` (stream
//! `<PREFIX>_SUBMIT`). Accepted starts show up on the events subject; rejects go to the
//! dead-letter stream as `{"reason", "code", "subject", "received_at", "body_redacted"}`.

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream;
use hcpflow_engine::{TenantId, WorkflowId};
use sha2::{Digest, Sha256};
use tokio::sync::watch;

use crate::api::fields::Fields;
use crate::api::intake::{Intake, StartVerb};
use crate::runtime::dead_letter::DeadLetters;
use crate::runtime::nats::Deliveries;
use hcpflow_protocol::{parse_body, ApiError, ErrorCode, StartRequest, StreamRole, Subjects};

#[derive(Debug, Clone)]
pub struct Submissions {
    pub intake: Arc<Intake>,
    /// Clients' submissions, or the server's own child starts.
    pub source: SubmissionSource,
    pub max_body_bytes: usize,
    /// How long a submission failing for a passing reason is retried.
    pub retry_for: Duration,
}

/// Where a consumer's starts come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubmissionSource {
    /// `<prefix>.submit.v1[.<tenant>].start`: clients, acting for the subject's tenant.
    Clients,
    /// `<prefix>.task.child`: parents' child starts, published by the server itself.
    Children,
}

impl SubmissionSource {
    /// The verb its starts come with.
    pub fn verb(self) -> StartVerb {
        match self {
            SubmissionSource::Clients => StartVerb::Start,
            SubmissionSource::Children => StartVerb::Child,
        }
    }

    /// Where its refused starts are recorded (`<prefix>.deadletter.<this>`).
    pub fn dead_letter_source(self) -> &'static str {
        match self {
            SubmissionSource::Clients => "submit",
            SubmissionSource::Children => "children",
        }
    }
}

/// One durable consumer of the intake: where it reads, its name, and whose starts.
#[derive(Debug, Clone)]
pub struct IntakeConsumer {
    pub stream: StreamRole,
    pub durable: &'static str,
    pub filter: String,
    pub source: SubmissionSource,
}

/// Every consumer the API role runs for starts — the one list the server starts and the
/// NATS permissions grant. The default tenant's and the named tenants' submissions have
/// a consumer each (work-queue consumers may not overlap); parents' child starts come
/// on the task stream, which only the server's processes reach.
pub fn intake_consumers(subjects: &Subjects) -> [IntakeConsumer; 3] {
    [
        IntakeConsumer {
            stream: StreamRole::Submit,
            durable: "intake",
            filter: subjects.submit_start(),
            source: SubmissionSource::Clients,
        },
        IntakeConsumer {
            stream: StreamRole::Submit,
            durable: "intake-tenants",
            filter: subjects.tenant_submit_all(),
            source: SubmissionSource::Clients,
        },
        IntakeConsumer {
            stream: StreamRole::Tasks,
            durable: "intake-children",
            filter: subjects.child_starts(),
            source: SubmissionSource::Children,
        },
    ]
}

/// The longest pause between two tries of a submission.
const RETRY_CAP: Duration = Duration::from_secs(30);

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
                    if matches!(error.code, ErrorCode::Unavailable | ErrorCode::Internal)
                        && self.still_retried(&message) =>
                {
                    let delivered = message.info().map_or(1, |info| info.delivered);
                    let pause = Duration::from_secs(1 << delivered.clamp(1, 6)).min(RETRY_CAP);
                    tracing::warn!(%error, ?pause, "submission not recorded; NATS will redeliver it");
                    let _ = message
                        .ack_with(async_nats::jetstream::AckKind::Nak(Some(pause)))
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

    /// Whether a submission that failed for a reason that may pass (the database down,
    /// no seal key yet) is tried again: for `retry_for` after it was published, then it
    /// is dead-lettered with the reason, instead of being retried for ever.
    fn still_retried(&self, message: &jetstream::Message) -> bool {
        let Ok(info) = message.info() else {
            return true;
        };
        let published = std::time::SystemTime::from(info.published);
        published.elapsed().unwrap_or_default() < self.retry_for
    }

    async fn accept(&self, message: &jetstream::Message) -> Result<(), ApiError> {
        let map = parse_body(&message.payload, self.max_body_bytes)?;
        let mut request = Fields(map).read::<StartRequest>()?;
        let tenant = self
            .intake
            .journal
            .outgoing
            .subjects
            .submit_tenant(&message.subject)
            .map_err(|error| ApiError::invalid(format!("the subject's tenant: {error}")))?;
        if request.workflow_id.is_none() {
            request.workflow_id = submission_id(&tenant, message);
        }
        self.intake
            .start(&tenant, self.source.verb(), request)
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
        DeadLetters::new(
            journal.js.clone(),
            &journal.outgoing.subjects,
            self.source.dead_letter_source(),
            journal.metrics.clone(),
        )
        .record(subject, body, error.code.as_str(), &error.message)
        .await
    }
}

/// The id of a submission that names none, derived from the message — its
/// `Nats-Msg-Id` when it has one, else its place in the stream — so that a redelivery
/// (the start committed, the ack lost) is the same start, answered `already_started`,
/// instead of a second workflow.
/// A named tenant's ids are its own: another tenant sending the same `Nats-Msg-Id`
/// names another workflow.
pub fn submission_id(tenant: &TenantId, message: &jetstream::Message) -> Option<WorkflowId> {
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
    let source = if tenant.is_default() {
        source
    } else {
        format!("tenant\0{tenant}\0{source}")
    };
    let digest = hcpflow_engine::lower_hex::lower_hex(&Sha256::digest(source.as_bytes()));
    WorkflowId::new(format!("sub-{}", &digest[..32])).ok()
}
