//! The request/reply API on `<prefix>.api.v1.*` (DESIGN.md §4).
//!
//! Every request gets exactly one reply, `{"ok": true, ...}` or `{"ok": false, "error":
//! {"code", "message"}}`; a reply that reports a change is sent only after the change
//! is committed in Postgres. Bad input never panics and never stops the subscription.

use std::sync::Arc;

use std::panic::AssertUnwindSafe;

use futures::{FutureExt, StreamExt};
use hcpflow_engine::event::{CancelRequested, SignalReceived};
use hcpflow_engine::{Event, HistoryEvent, Seq, TenantId, WorkflowId};
use hcpflow_eventstore::{Error as StoreError, WorkflowFilter, WorkflowSummary};
use serde_json::{json, Map, Value};
use tokio::sync::watch;

use crate::api::fields::{Fields, DEFAULT_PAGE};
use crate::api::intake::{Intake, StartVerb};
use crate::api::queue::RequestQueue;
use crate::api::views::{cluster_view, history_entry, store_error, workflow_view};
use crate::runtime::journal::Write;
use hcpflow_protocol::subjects::StreamRole;
use hcpflow_protocol::{
    ok_reply, parse_body, ApiError, ApiRequest, CancelRequest, ClustersRequest, DescribeRequest,
    DestroyRequest, ErrorCode, HistoryRequest, ListRequest, SignalRequest, StartRequest,
    VerifyRequest,
};

#[derive(Debug)]
pub struct Api {
    pub intake: Arc<Intake>,
    pub client: async_nats::Client,
    pub max_body_bytes: usize,
    /// Bytes of signal payloads one workflow's history may take in all
    /// (`--max-signal-bytes`): what a client can write into a workflow's log.
    pub max_signal_bytes: usize,
    /// Reported by `verify`, for callers without a key of their own.
    pub audit_public_key: Option<hcpflow_engine::AuditPublicKey>,
    /// The requests handled at once and waiting; beyond them, `overloaded`.
    pub queue: RequestQueue,
}

impl Api {
    pub async fn run(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) -> anyhow::Result<()> {
        let subjects = &self.intake.journal.outgoing.subjects;
        let mut requests = self
            .client
            .queue_subscribe(subjects.api_all(), "hcpflow-api".to_owned())
            .await?;
        // The loop never waits: each request waits for its turn in a task of its own, or
        // is answered `overloaded` (api/queue.rs), so a burst is answered, not left to
        // pile up unread until its clients give up.
        loop {
            let request = tokio::select! {
                _ = shutdown.changed() => break,
                request = requests.next() => request,
            };
            let Some(request) = request else { break };
            let api = self.clone();
            tokio::spawn(async move {
                match api.queue.enter().await {
                    Ok(_place) => api.answer(request).await,
                    Err(refusal) => api.refuse(request, refusal).await,
                }
            });
        }
        let _ = requests.unsubscribe().await;
        // Requests in flight get a bounded time to be answered, like tasks.
        if !self.queue.drain(crate::runtime::nats::SHUTDOWN_GRACE).await {
            tracing::warn!(
                "API requests still in flight at the shutdown deadline are left unanswered"
            );
        }
        Ok(())
    }

    /// Answers a request the queue did not let in (`overloaded`), without reading it.
    async fn refuse(&self, request: async_nats::Message, refusal: ApiError) {
        let Some(reply_to) = request.reply else {
            return;
        };
        let metrics = &self.intake.journal.metrics;
        metrics.api_requests.inc();
        metrics.api_errors.inc();
        metrics.api_overloaded.inc();
        let body = serde_json::to_vec(&refusal.to_reply()).unwrap_or_default();
        if let Err(error) = self.client.publish(reply_to, body.into()).await {
            tracing::warn!(%error, "sending an API reply failed");
        }
    }

    async fn answer(&self, request: async_nats::Message) {
        let Some(reply_to) = request.reply.clone() else {
            tracing::debug!(subject = %request.subject, "API request without a reply subject ignored");
            return;
        };
        self.intake.journal.metrics.api_requests.inc();
        let (tenant, verb) = self
            .intake
            .journal
            .outgoing
            .subjects
            .api_route(&request.subject)
            .unwrap_or((Ok(TenantId::default_tenant()), ""));
        let answer = match tenant {
            Ok(tenant) => unless_panicked(verb, self.handle(&tenant, verb, &request.payload)).await,
            Err(error) => Err(ApiError::invalid(format!("the subject's tenant: {error}"))),
        };
        let reply = match answer {
            Ok(fields) => ok_reply(fields),
            Err(error) => {
                self.intake.journal.metrics.api_errors.inc();
                tracing::debug!(verb, %error, "API request rejected");
                error.to_reply()
            }
        };
        let body = serde_json::to_vec(&reply).unwrap_or_default();
        if let Err(error) = self.client.publish(reply_to, body.into()).await {
            tracing::warn!(%error, "sending an API reply failed");
        }
    }

    /// Handles one request body for `verb`, from a caller acting for `tenant`: every
    /// read and write is the tenant's alone (another tenant's workflow is `not_found`).
    pub async fn handle(
        &self,
        tenant: &TenantId,
        verb: &str,
        body: &[u8],
    ) -> Result<Value, ApiError> {
        let fields = Fields(parse_body(body, self.max_body_bytes)?);
        match verb {
            StartRequest::VERB => self.start(tenant, StartVerb::Start, fields.read()?).await,
            DestroyRequest::VERB => {
                let DestroyRequest(request) = fields.read()?;
                self.start(tenant, StartVerb::Destroy, request).await
            }
            DescribeRequest::VERB => self.describe(tenant, fields.read()?).await,
            ListRequest::VERB => self.list(tenant, fields.read()?).await,
            HistoryRequest::VERB => self.history(tenant, fields.read()?).await,
            SignalRequest::VERB => self.signal(tenant, fields.read()?).await,
            CancelRequest::VERB => self.cancel(tenant, fields.read()?).await,
            ClustersRequest::VERB => self.clusters(tenant, fields.read()?).await,
            VerifyRequest::VERB => self.verify(tenant, fields.read()?).await,
            other => Err(ApiError::invalid(format!(
                "unknown verb {other:?}; the API has {}",
                hcpflow_protocol::VERBS.join(", ")
            ))),
        }
    }

    async fn start(
        &self,
        tenant: &TenantId,
        verb: StartVerb,
        request: StartRequest,
    ) -> Result<Value, ApiError> {
        let (id, status) = self.intake.start(tenant, verb, request).await?;
        Ok(json!({"workflow_id": id.as_str(), "status": status.as_str()}))
    }

    /// The workflow's summary, if it is `tenant`'s; another tenant's is not found.
    async fn owned(&self, tenant: &TenantId, id: &WorkflowId) -> Result<WorkflowSummary, ApiError> {
        match self.store().get_workflow(id).await {
            Ok(summary) if &summary.tenant == tenant => Ok(summary),
            Ok(_) => Err(store_error(StoreError::NotFound(id.clone()))),
            Err(error) => Err(store_error(error)),
        }
    }

    async fn describe(
        &self,
        tenant: &TenantId,
        request: DescribeRequest,
    ) -> Result<Value, ApiError> {
        let summary = self.owned(tenant, &request.workflow_id).await?;
        Ok(json!({"workflow": workflow_view(&summary)}))
    }

    async fn list(&self, tenant: &TenantId, request: ListRequest) -> Result<Value, ApiError> {
        let filter = WorkflowFilter {
            status: request.status,
            workflow_type: request.workflow_type,
            concurrency_key: request.concurrency_key,
            events_prefix: None,
            tenant: Some(tenant.clone()),
        };
        let limit = request.limit.unwrap_or(DEFAULT_PAGE);
        let page = self
            .store()
            .list_workflows(&filter, limit, request.cursor.as_deref())
            .await
            .map_err(store_error)?;
        Ok(json!({
            "workflows": page.workflows.iter().map(workflow_view).collect::<Vec<_>>(),
            "cursor": page.cursor,
        }))
    }

    /// The cluster registry: live clusters (and with `include_destroyed`, destroyed
    /// ones), newest first; `name` narrows it to one name.
    async fn clusters(
        &self,
        tenant: &TenantId,
        request: ClustersRequest,
    ) -> Result<Value, ApiError> {
        let clusters = self
            .store()
            .list_clusters(
                request.name.as_deref(),
                request.include_destroyed,
                Some(tenant),
                request.limit.unwrap_or(DEFAULT_PAGE),
            )
            .await
            .map_err(store_error)?;
        Ok(json!({"clusters": clusters.iter().map(cluster_view).collect::<Vec<_>>()}))
    }

    /// The evidence for an audit: the hash chain recomputed in the database
    /// (`verified`, `events`, `head_hash`, or `first_bad_seq` and `reason`), the latest
    /// signed checkpoint in Postgres and on the witness stream, the history's hash at
    /// each checkpoint's seq, the workflow's status, and this server's audit public key.
    /// Checking the signatures is the caller's job, with the key it trusts.
    async fn verify(&self, tenant: &TenantId, request: VerifyRequest) -> Result<Value, ApiError> {
        let id = request.workflow_id;
        let summary = self.owned(tenant, &id).await?;
        let mut reply = match self.store().verify_history(&id).await {
            Ok(verified) => json!({
                "verified": true,
                "events": verified.events,
                "head_hash": verified.head_hash.to_hex(),
            }),
            Err(hcpflow_eventstore::Error::Corrupt { seq, reason, .. }) => json!({
                "verified": false,
                "first_bad_seq": seq,
                "reason": reason,
            }),
            Err(error) => return Err(store_error(error)),
        };
        let database = self
            .store()
            .latest_checkpoint(&id)
            .await
            .map_err(store_error)?
            .map(|stored| stored.checkpoint);
        let witness = self.witness_checkpoint(&id).await?;
        let mut hash_at = Map::new();
        let mut seqs: Vec<Seq> = database
            .iter()
            .chain(witness.iter())
            .map(|c| c.seq)
            .collect();
        seqs.dedup();
        for seq in seqs {
            let page = self
                .store()
                .read_history(&id, seq, 1)
                .await
                .map_err(store_error)?;
            if let Some(event) = page.events.first().filter(|e| e.seq == seq) {
                hash_at.insert(seq.to_string(), json!(event.hash.to_hex()));
            }
        }
        reply["status"] = json!(summary.status.as_str());
        reply["checkpoints"] = json!({"database": database, "witness": witness});
        reply["hash_at"] = Value::Object(hash_at);
        reply["audit_public_key"] = json!(self.audit_public_key.map(|k| k.to_base64()));
        Ok(reply)
    }

    /// The latest checkpoint of `id` on the witness stream, if any.
    async fn witness_checkpoint(
        &self,
        id: &WorkflowId,
    ) -> Result<Option<hcpflow_engine::Checkpoint>, ApiError> {
        use async_nats::jetstream::stream::LastRawMessageErrorKind;
        let journal = &self.intake.journal;
        let unavailable = |e: String| {
            ApiError::new(
                ErrorCode::Unavailable,
                format!("reading the witness stream: {e}"),
            )
        };
        // No stream info needed: one request fewer.
        let stream = journal
            .js
            .get_stream_no_info(journal.outgoing.subjects.stream(StreamRole::Audit))
            .await
            .map_err(|e| unavailable(e.to_string()))?;
        match stream
            .get_last_raw_message_by_subject(&journal.outgoing.subjects.audit(id.as_str()))
            .await
        {
            Ok(message) => serde_json::from_slice(&message.payload)
                .map(Some)
                .map_err(|e| {
                    ApiError::internal(format!("a witness message is not a checkpoint: {e}"))
                }),
            Err(error) if matches!(error.kind(), LastRawMessageErrorKind::NoMessageFound) => {
                Ok(None)
            }
            Err(error) => Err(unavailable(error.to_string())),
        }
    }

    async fn history(&self, tenant: &TenantId, request: HistoryRequest) -> Result<Value, ApiError> {
        let id = request.workflow_id;
        // The cursor was checked when the request was read.
        let from = match &request.cursor {
            Some(cursor) => cursor.parse::<Seq>().unwrap_or(Seq::FIRST),
            None => request.from_seq.unwrap_or(Seq::FIRST),
        };
        let limit = request.limit.unwrap_or(DEFAULT_PAGE);
        let raw = request.raw;
        // Distinguish "no such workflow" from "no events from here".
        self.owned(tenant, &id).await?;
        let page = self
            .store()
            .read_history(&id, from, limit)
            .await
            .map_err(store_error)?;
        let mut events = Vec::with_capacity(page.events.len());
        for event in &page.events {
            let mut entry = history_entry(event);
            if raw {
                // The exact bytes that were hashed, for an independent check of the chain.
                let body = std::str::from_utf8(&event.body).map_err(|_| {
                    ApiError::internal(format!("event {} of {id} is not UTF-8", event.seq))
                })?;
                entry["body"] = json!(body);
            }
            events.push(entry);
        }
        Ok(json!({
            "events": events,
            "cursor": page.next_from.map(|seq| seq.to_string()),
        }))
    }

    async fn signal(&self, tenant: &TenantId, request: SignalRequest) -> Result<Value, ApiError> {
        let SignalRequest {
            workflow_id: id,
            signal: name,
            payload,
        } = request;
        let size = signal_bytes(&name, &payload);
        let limit = self.max_signal_bytes;
        let mut over_budget = None;
        self.append_input(tenant, &id, |history| {
            over_budget = None;
            let received: usize = history
                .iter()
                .filter_map(|recorded| match &recorded.event {
                    Event::SignalReceived(signal) => {
                        Some(signal_bytes(&signal.name, &signal.payload))
                    }
                    _ => None,
                })
                .sum();
            if received + size > limit {
                over_budget = Some(received);
                return None;
            }
            Some(
                SignalReceived {
                    name: name.clone(),
                    payload: payload.clone(),
                }
                .into(),
            )
        })
        .await?;
        if let Some(received) = over_budget {
            return Err(ApiError::new(
                ErrorCode::TooLarge,
                format!(
                    "workflow {id} has received {received} bytes of signals; this one ({size} \
                     bytes) would pass the server's limit of {limit} (--max-signal-bytes)"
                ),
            ));
        }
        Ok(json!({}))
    }

    /// Records the request once: a second cancel of the same workflow writes nothing
    /// more into its log.
    async fn cancel(&self, tenant: &TenantId, request: CancelRequest) -> Result<Value, ApiError> {
        let CancelRequest {
            workflow_id: id,
            reason,
        } = request;
        self.append_input(tenant, &id, |history| {
            let already = history
                .iter()
                .any(|recorded| matches!(recorded.event, Event::CancelRequested(_)));
            (!already).then(|| {
                CancelRequested {
                    reason: reason.clone(),
                }
                .into()
            })
        })
        .await?;
        Ok(json!({"status": "cancel_requested"}))
    }

    /// Records the input event `event` makes of a live workflow's history, if any (and,
    /// where this process runs workflow code, its reaction) in one transaction.
    async fn append_input(
        &self,
        tenant: &TenantId,
        id: &WorkflowId,
        mut event: impl FnMut(&[HistoryEvent]) -> Option<Event> + Send,
    ) -> Result<(), ApiError> {
        let mut ended = None;
        let mut foreign = false;
        let step = self
            .intake
            .journal
            .step(id, |summary, history| {
                foreign = &summary.tenant != tenant;
                if foreign {
                    return None;
                }
                if summary.status.is_terminal() {
                    ended = Some(summary.status);
                    return None;
                }
                Some(Write {
                    events: vec![event(history)?],
                    ..Write::default()
                })
            })
            .await
            .map_err(store_error)?;
        if foreign {
            return Err(store_error(StoreError::NotFound(id.clone())));
        }
        if let (true, Some(status)) = (step.nothing_to_do, ended) {
            return Err(ApiError::new(
                ErrorCode::Conflict,
                format!("workflow {id} has already ended ({status})"),
            ));
        }
        Ok(())
    }

    fn store(&self) -> &hcpflow_eventstore::EventStore {
        &self.intake.journal.store
    }
}

/// What a signal costs against `--max-signal-bytes`: its name and payload as JSON, plus
/// what any event costs (envelope, hashes, a row), so tiny signals are not free.
fn signal_bytes(name: &str, payload: &Value) -> usize {
    SIGNAL_OVERHEAD + name.len() + payload.to_string().len()
}

/// The bytes every signal counts for besides its name and payload.
pub const SIGNAL_OVERHEAD: usize = 256;

/// The handler's answer — or, if it panicked, `internal`: a bug costs one request its
/// answer, never the reply itself (nor the process).
async fn unless_panicked(
    verb: &str,
    handler: impl std::future::Future<Output = Result<Value, ApiError>>,
) -> Result<Value, ApiError> {
    AssertUnwindSafe(handler)
        .catch_unwind()
        .await
        .unwrap_or_else(|_| {
            tracing::error!(verb, "an API request's handler panicked");
            Err(ApiError::internal(
                "the server failed to answer this request",
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_handler_that_panics_costs_an_internal_answer_not_the_reply() {
        let answered = unless_panicked("describe", async { Ok(serde_json::json!({"x": 1})) }).await;
        assert_eq!(answered.unwrap()["x"], 1);
        let panicked = unless_panicked("describe", async {
            panic!("a bug in a handler");
        })
        .await
        .unwrap_err();
        assert_eq!(panicked.code, ErrorCode::Internal);
    }
}
