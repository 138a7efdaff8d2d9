//! Connecting to NATS, and creating the streams and consumers (idempotently).

use std::panic::AssertUnwindSafe;
use std::time::Duration;

use anyhow::Context;
use async_nats::jetstream::{self, consumer, stream};
use futures::FutureExt;

use hcpflow_protocol::subjects::{StreamRole, Subjects};

/// How long a worker may hold a task without a heartbeat before NATS redelivers it.
pub const ACK_WAIT: Duration = Duration::from_secs(30);

/// The durable consumer of workflow tasks, shared by every workflow worker.
pub const WORKFLOW_CONSUMER: &str = "workflow";

/// The durable consumer of one activity task queue.
pub fn activity_consumer(queue: &str) -> String {
    format!("activity-{queue}")
}
/// How long a `Nats-Msg-Id` is remembered on the task stream.
pub const TASK_DUPLICATE_WINDOW: Duration = Duration::from_secs(10 * 60);

/// How big the streams may grow and how many copies each keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamLimits {
    /// Copies of each stream (1 on a single NATS server; 3 on a cluster).
    pub replicas: usize,
    /// Bytes each stream may hold (-1: no bound). A full work queue or witness refuses new messages
    /// (the publisher sees it and retries); a full events or dead-letter stream drops
    /// its oldest.
    pub max_bytes: i64,
    /// The largest message the submit stream takes.
    pub max_message_size: i32,
}

/// 256 MiB per stream unless configured (`--stream-max-bytes`; -1 lifts the bound).
/// NATS reserves a stream's `max_bytes` against its store's `max_file_store` (by
/// default 75% of the free disk) when the stream is made, so a deployment's NATS needs
/// room for five of these per prefix.
pub const DEFAULT_STREAM_MAX_BYTES: i64 = 256 << 20;

/// Creates the streams of DESIGN.md §4, or brings an existing work stream's limits up
/// to `limits` (what `hcpflow migrate` does, and a server that migrates at start);
/// returns nothing but errors. The witness stream is made once and never changed here:
/// tighter limits (a short `max_age`, few `max_msgs`) would age checkpoints out, so no
/// hcpflow credential may update it (`hcpflow nats permissions`), and its limits change
/// only by a NATS administrator's hand.
///
/// Work-queue streams reject overlapping consumer filters, so every consumer filters
/// one subject of its own.
pub async fn ensure_streams(
    js: &jetstream::Context,
    subjects: &Subjects,
    limits: StreamLimits,
) -> anyhow::Result<()> {
    for role in StreamRole::ALL {
        let deadline = tokio::time::Instant::now() + STREAMS_PATIENCE;
        loop {
            match ensure_stream(js, subjects, role, limits).await {
                Ok(()) => break,
                Err(error)
                    if jetstream_not_answering(&error)
                        && tokio::time::Instant::now() < deadline =>
                {
                    tracing::warn!(
                        error = format!("{error:#}"),
                        "JetStream did not answer; asking again"
                    );
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                Err(error) => return Err(error),
            }
        }
    }
    Ok(())
}

/// How long a start asks again a JetStream that does not answer yet: a NATS cluster
/// that is electing its leaders (just started, or a node lost) answers within seconds.
const STREAMS_PATIENCE: Duration = Duration::from_secs(60);

/// A request to JetStream that timed out or found no JetStream (yet), as opposed to an
/// answer that refuses: only these are asked again.
fn jetstream_not_answering(error: &anyhow::Error) -> bool {
    use async_nats::jetstream::context::{
        CreateStreamError, CreateStreamErrorKind, GetStreamError, GetStreamErrorKind, RequestError,
        RequestErrorKind,
    };
    error.chain().any(|cause| {
        cause.downcast_ref::<CreateStreamError>().is_some_and(|e| {
            matches!(
                e.kind(),
                CreateStreamErrorKind::TimedOut | CreateStreamErrorKind::JetStreamUnavailable
            )
        }) || cause
            .downcast_ref::<GetStreamError>()
            .is_some_and(|e| matches!(e.kind(), GetStreamErrorKind::Request))
            || cause.downcast_ref::<RequestError>().is_some_and(|e| {
                matches!(
                    e.kind(),
                    RequestErrorKind::TimedOut | RequestErrorKind::NoResponders
                )
            })
    })
}

/// Creates one stream, or brings its limits up to `limits` (see [`ensure_streams`]).
async fn ensure_stream(
    js: &jetstream::Context,
    subjects: &Subjects,
    role: StreamRole,
    limits: StreamLimits,
) -> anyhow::Result<()> {
    let config = stream_config(subjects, role, limits);
    let name = config.name.clone();
    match js.get_stream(&name).await {
        Ok(mut stream) => {
            let current = stream.info().await?.config.clone();
            // NATS reports an unset message size limit (0 asked) as -1: both mean none.
            let limits_of =
                |c: &stream::Config| (c.max_bytes, c.num_replicas, c.max_message_size.max(0));
            if role == StreamRole::Audit {
                if limits_of(&current) != limits_of(&config) {
                    tracing::warn!(stream = %name, current = ?limits_of(&current), asked = ?limits_of(&config),
                        "the witness stream keeps its limits: hcpflow never changes it; a NATS administrator may");
                }
                return Ok(());
            }
            if limits_of(&current) != limits_of(&config) {
                js.update_stream(config)
                    .await
                    .with_context(|| format!("updating the limits of stream {name}"))?;
            }
        }
        // Unanswered: whether it exists is not known yet.
        Err(error)
            if matches!(
                error.kind(),
                async_nats::jetstream::context::GetStreamErrorKind::Request
            ) =>
        {
            return Err(anyhow::Error::new(error).context(format!("looking up stream {name}")));
        }
        Err(_) => {
            let bytes = config.max_bytes;
            js.create_stream(config).await.with_context(|| {
                format!("creating stream {name} (bounded to {bytes} bytes: if NATS lacks the storage, lower --stream-max-bytes or raise its max_file_store)")
            })?;
        }
    }
    Ok(())
}

/// Checks that every stream exists — for a process that does not migrate: it creates
/// none (the witness stream in particular is `hcpflow migrate`'s to make).
pub async fn verify_streams(js: &jetstream::Context, subjects: &Subjects) -> anyhow::Result<()> {
    for role in StreamRole::ALL {
        let name = subjects.stream(role);
        js.get_stream(&name).await.with_context(|| {
            format!("stream {name} does not exist: run `hcpflow migrate` (or start a server with the owner's database URL) first")
        })?;
    }
    Ok(())
}

fn stream_config(subjects: &Subjects, role: StreamRole, limits: StreamLimits) -> stream::Config {
    let name = subjects.stream(role);
    let base = stream::Config {
        name,
        max_bytes: limits.max_bytes,
        num_replicas: limits.replicas.max(1),
        ..Default::default()
    };
    match role {
        StreamRole::Submit => stream::Config {
            subjects: vec![subjects.submit_all()],
            retention: stream::RetentionPolicy::WorkQueue,
            discard: stream::DiscardPolicy::New,
            max_message_size: limits.max_message_size,
            duplicate_window: Duration::from_secs(120),
            ..base
        },
        StreamRole::Tasks => stream::Config {
            subjects: vec![subjects.tasks_all()],
            retention: stream::RetentionPolicy::WorkQueue,
            discard: stream::DiscardPolicy::New,
            duplicate_window: TASK_DUPLICATE_WINDOW,
            ..base
        },
        StreamRole::Events => stream::Config {
            subjects: vec![subjects.events_all()],
            retention: stream::RetentionPolicy::Limits,
            max_age: Duration::from_secs(7 * 24 * 3600),
            duplicate_window: Duration::from_secs(120),
            ..base
        },
        StreamRole::DeadLetter => stream::Config {
            subjects: vec![subjects.dead_letter_all()],
            retention: stream::RetentionPolicy::Limits,
            max_age: Duration::from_secs(30 * 24 * 3600),
            ..base
        },
        // The independent witness of the checkpoints: kept forever (full, it refuses
        // new checkpoints rather than drop old ones), and neither a message nor the
        // stream's contents can be deleted through NATS.
        StreamRole::Audit => stream::Config {
            subjects: vec![subjects.audit_all()],
            retention: stream::RetentionPolicy::Limits,
            discard: stream::DiscardPolicy::New,
            deny_delete: true,
            deny_purge: true,
            allow_direct: true,
            duplicate_window: Duration::from_secs(120),
            ..base
        },
    }
}

/// A durable pull consumer on one subject of a stream, created if missing.
pub async fn durable_consumer(
    js: &jetstream::Context,
    stream_name: &str,
    durable: &str,
    filter_subject: String,
) -> anyhow::Result<consumer::PullConsumer> {
    let stream = js
        .get_stream(stream_name)
        .await
        .with_context(|| format!("opening stream {stream_name}"))?;
    let consumer = stream
        .get_or_create_consumer(
            durable,
            consumer::pull::Config {
                durable_name: Some(durable.to_owned()),
                filter_subject,
                ack_policy: consumer::AckPolicy::Explicit,
                ack_wait: ACK_WAIT,
                max_ack_pending: 10_000,
                ..Default::default()
            },
        )
        .await
        .with_context(|| format!("creating consumer {durable} on {stream_name}"))?;
    Ok(consumer)
}

/// Messages of a durable pull consumer that survive NATS restarts: after an error or
/// the end of the stream, the pull is set up again.
pub struct Deliveries {
    consumer: consumer::PullConsumer,
    stream: Option<consumer::pull::Stream>,
    label: &'static str,
}

impl std::fmt::Debug for Deliveries {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Deliveries({})", self.label)
    }
}

impl Deliveries {
    pub fn new(consumer: consumer::PullConsumer, label: &'static str) -> Self {
        Self {
            consumer,
            stream: None,
            label,
        }
    }

    /// The next message, or `None` once `shutdown` turns true.
    pub async fn next(
        &mut self,
        shutdown: &mut tokio::sync::watch::Receiver<bool>,
    ) -> Option<jetstream::Message> {
        use futures::StreamExt;
        loop {
            if *shutdown.borrow() {
                return None;
            }
            let Some(stream) = self.stream.as_mut() else {
                match self.consumer.messages().await {
                    Ok(stream) => self.stream = Some(stream),
                    Err(error) => {
                        tracing::warn!(label = self.label, %error, "cannot pull tasks; retrying");
                        tokio::select! {
                            _ = shutdown.changed() => return None,
                            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                        }
                    }
                }
                continue;
            };
            tokio::select! {
                _ = shutdown.changed() => return None,
                next = stream.next() => match next {
                    Some(Ok(message)) => return Some(message),
                    Some(Err(error)) => {
                        tracing::warn!(label = self.label, %error, "task stream interrupted; pulling again");
                        self.stream = None;
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                    None => {
                        self.stream = None;
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                },
            }
        }
    }
}

/// Runs `handle` for every delivered task message, each holding one of the `total` `slots`, until
/// shutdown; then waits until every slot is free again — the handlers in flight, and
/// whatever else holds a slot (eager activity runs). What they do not ack, NATS hands
/// to another process. Redeliveries are counted; a message that does not decode as `T` is
/// logged and acknowledged, so it cannot come back forever.
pub async fn serve_tasks<T, F, Fut>(
    mut deliveries: Deliveries,
    (slots, total): (std::sync::Arc<tokio::sync::Semaphore>, usize),
    mut shutdown: tokio::sync::watch::Receiver<bool>,
    dead_letters: crate::runtime::dead_letter::DeadLetters,
    handle: F,
) -> anyhow::Result<()>
where
    T: serde::de::DeserializeOwned,
    F: Fn(jetstream::Message, T) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    while let Some(message) = deliveries.next(&mut shutdown).await {
        if message.info().is_ok_and(|info| info.delivered > 1) {
            dead_letters.metrics.redeliveries.inc();
        }
        let task: T = match serde_json::from_slice(&message.payload) {
            Ok(task) => task,
            Err(error) => {
                // Never processable: recorded, then acknowledged (kept if the record
                // could not be stored, to be tried again).
                tracing::error!(label = deliveries.label, %error, "malformed task dead-lettered");
                let reason = format!(
                    "a {} message that does not decode: {error}",
                    deliveries.label
                );
                match dead_letters
                    .record(
                        &message.subject,
                        &message.payload,
                        "invalid_request",
                        &reason,
                    )
                    .await
                {
                    Ok(()) => {
                        let _ = message.ack().await;
                    }
                    Err(error) => {
                        tracing::warn!(%error, "dead-lettering a malformed task failed; NATS will redeliver it");
                        let _ = message
                            .ack_with(jetstream::AckKind::Nak(Some(Duration::from_secs(5))))
                            .await;
                    }
                }
                continue;
            }
        };
        let permit = slots.clone().acquire_owned().await?;
        let work = handle(message, task);
        let label = deliveries.label;
        tokio::spawn(async move {
            // Handlers catch their own panics and settle the message; this is the net
            // under them: the slot comes back whatever happens.
            if AssertUnwindSafe(work).catch_unwind().await.is_err() {
                tracing::error!(
                    label,
                    "a task handler panicked; its message returns to NATS"
                );
            }
            drop(permit);
        });
    }
    // Finish what runs, within a deadline: a task still running then is abandoned (its
    // message returns to NATS after the ack wait, its claims run out), so a shutdown
    // never waits on one long or stuck task.
    let all = u32::try_from(total).unwrap_or(u32::MAX);
    if tokio::time::timeout(SHUTDOWN_GRACE, slots.acquire_many(all))
        .await
        .is_err()
    {
        let running = total.saturating_sub(slots.available_permits());
        tracing::warn!(
            label = deliveries.label,
            running,
            "tasks still running at the shutdown deadline are left to other workers"
        );
    }
    Ok(())
}

/// How long a shutdown waits for the tasks in flight.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(20);

#[cfg(test)]
mod tests {
    use super::*;
    use async_nats::jetstream::context::{
        CreateStreamError, CreateStreamErrorKind, GetStreamError, GetStreamErrorKind,
    };

    #[test]
    fn only_a_jetstream_that_does_not_answer_is_asked_again() {
        let unanswered = [
            anyhow::Error::new(CreateStreamError::new(CreateStreamErrorKind::TimedOut))
                .context("creating stream X"),
            anyhow::Error::new(CreateStreamError::new(
                CreateStreamErrorKind::JetStreamUnavailable,
            )),
            anyhow::Error::new(GetStreamError::new(GetStreamErrorKind::Request))
                .context("looking up stream X"),
        ];
        for error in &unanswered {
            assert!(jetstream_not_answering(error), "{error:#}");
        }
        let answered = [
            anyhow::Error::new(CreateStreamError::new(CreateStreamErrorKind::Response)),
            anyhow::Error::new(CreateStreamError::new(
                CreateStreamErrorKind::InvalidStreamName,
            )),
            anyhow::anyhow!("timed out, but not JetStream's"),
        ];
        for error in &answered {
            assert!(!jetstream_not_answering(error), "{error:#}");
        }
    }
}
