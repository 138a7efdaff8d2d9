//! A client of the public NATS API (DESIGN.md §4), as the `hcpflow` commands use it:
//! one request, one reply, and the reply's error turned into a typed [`ApiError`].

use std::time::Duration;

use serde_json::{json, Value};

use crate::connection::{connect, NatsConfig};
use crate::error::{ApiError, ErrorCode};
use crate::replies::{HistoryEntry, WorkflowView};
use crate::requests::{ApiRequest, DescribeRequest, HistoryRequest, ListRequest};
use crate::subjects::Subjects;
use hcpflow_engine::{Seq, TenantId, WorkflowId};

/// How long one request may wait for its reply.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a request is sent again while no server answers its subject.
const NO_SERVER_PATIENCE: Duration = Duration::from_secs(5);
/// How long a request answered `overloaded` is sent again.
const OVERLOADED_PATIENCE: Duration = Duration::from_secs(300);

/// `pause` times a factor between 0.5 and 1.5, so that clients refused together do not
/// come back together.
fn jittered(pause: Duration) -> Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    pause.mul_f64(0.5 + f64::from(nanos % 1000) / 1000.0)
}

/// The page sizes the paging calls ask for: the most the server gives for workflows;
/// fewer events, which can be large, so a page stays well under NATS's payload limit.
const WORKFLOW_PAGE: u32 = 1000;
const HISTORY_PAGE: u32 = 500;

/// Why a call did not return the reply's fields.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The server answered `{"ok": false, ...}`.
    #[error(transparent)]
    Refused(#[from] ApiError),
    /// Nobody answers on the API subject: no server runs the API role.
    #[error("no hcpflow server answers on {subject} (for {NO_SERVER_PATIENCE:?}; is `hcpflow server` running, with the same --nats-url and prefix?)")]
    NoServer { subject: String },
    #[error("no reply on {subject} in {REQUEST_TIMEOUT:?}")]
    TimedOut { subject: String },
    #[error("request on {subject}: {message}")]
    Transport { subject: String, message: String },
    /// The reply does not have the protocol's shape (a server of another version?).
    #[error("the reply on {subject} does not match the protocol: {message}")]
    Unexpected { subject: String, message: String },
}

#[derive(Debug, Clone)]
pub struct ApiClient {
    pub client: async_nats::Client,
    pub subjects: Subjects,
    /// The tenant every request acts for (its subjects, `<prefix>.api.v1.<tenant>.*`).
    pub tenant: TenantId,
}

impl ApiClient {
    pub async fn connect(
        config: &NatsConfig,
        prefix: &str,
        tenant: TenantId,
    ) -> anyhow::Result<Self> {
        let subjects = Subjects::new(prefix)?;
        let client = connect(config, "hcpflow-cli").await?;
        Ok(Self {
            client,
            subjects,
            tenant,
        })
    }

    /// Sends `body` to the tenant's `<verb>` subject; the reply's fields without `ok`.
    /// A request the server answers `overloaded` (it did not look at it) is sent again
    /// after the pause it suggests, give or take a random half, for up to
    /// `OVERLOADED_PATIENCE`; then the `overloaded` error is returned.
    pub async fn call(&self, verb: &str, body: Value) -> Result<Value, CallError> {
        let payload = serde_json::to_vec(&body).unwrap_or_default();
        let started = tokio::time::Instant::now();
        loop {
            match self.call_once(verb, &payload).await {
                Err(CallError::Refused(error))
                    if error.code == ErrorCode::Overloaded
                        && started.elapsed() < OVERLOADED_PATIENCE =>
                {
                    let suggested = Duration::from_millis(error.retry_after_ms.unwrap_or(100));
                    tokio::time::sleep(jittered(suggested.min(Duration::from_secs(10)))).await;
                }
                other => return other,
            }
        }
    }

    /// One request, sent again only while no server answers its subject.
    async fn call_once(&self, verb: &str, payload: &[u8]) -> Result<Value, CallError> {
        use async_nats::RequestErrorKind;

        let subject = self.subjects.tenant_api(&self.tenant, verb);
        // "No responders" means no server got the request: sending it again is safe for
        // every verb. It bridges the moment a server restarts, or its subscription moves
        // to another node of a NATS cluster that lost one.
        let started = tokio::time::Instant::now();
        let mut pause = Duration::from_millis(50);
        let reply = loop {
            let request = async_nats::Request::new()
                .payload(payload.to_vec().into())
                .timeout(Some(REQUEST_TIMEOUT));
            match self.client.send_request(subject.clone(), request).await {
                Err(error)
                    if error.kind() == RequestErrorKind::NoResponders
                        && started.elapsed() + pause < NO_SERVER_PATIENCE =>
                {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(1));
                }
                other => break other,
            }
        };
        let reply = reply.map_err(|error| match error.kind() {
            RequestErrorKind::NoResponders => CallError::NoServer {
                subject: subject.clone(),
            },
            RequestErrorKind::TimedOut => CallError::TimedOut {
                subject: subject.clone(),
            },
            _ => CallError::Transport {
                subject: subject.clone(),
                message: error.to_string(),
            },
        })?;
        let mut reply: Value =
            serde_json::from_slice(&reply.payload).map_err(|error| CallError::Transport {
                subject: subject.clone(),
                message: format!("the reply is not JSON: {error}"),
            })?;
        if reply["ok"] == json!(true) {
            if let Some(fields) = reply.as_object_mut() {
                fields.remove("ok");
            }
            return Ok(reply);
        }
        let code = serde_json::from_value::<ErrorCode>(reply["error"]["code"].clone())
            .unwrap_or(ErrorCode::Internal);
        let message = reply["error"]["message"]
            .as_str()
            .unwrap_or("the server gave no message")
            .to_owned();
        let mut error = ApiError::new(code, message);
        error.retry_after_ms = reply["error"]["retry_after_ms"].as_u64();
        Err(error.into())
    }

    /// Sends a typed request to its verb; the reply's fields, typed.
    pub async fn request<R: ApiRequest>(&self, request: &R) -> Result<R::Reply, CallError> {
        let body = serde_json::to_value(request).unwrap_or_default();
        let reply = self.call(R::VERB, body).await?;
        serde_json::from_value(reply).map_err(|error| CallError::Unexpected {
            subject: self.subjects.tenant_api(&self.tenant, R::VERB),
            message: error.to_string(),
        })
    }

    /// `describe`: one workflow's summary.
    pub async fn describe(&self, workflow_id: &WorkflowId) -> Result<WorkflowView, CallError> {
        let request = DescribeRequest {
            workflow_id: workflow_id.clone(),
        };
        Ok(self.request(&request).await?.workflow)
    }

    /// Every history entry from `from_seq` on, following the cursor.
    pub async fn history_from(
        &self,
        workflow_id: &WorkflowId,
        from_seq: Seq,
    ) -> Result<Vec<HistoryEntry>, CallError> {
        self.history_pages(workflow_id, from_seq, false).await
    }

    /// As [`Self::history_from`], each entry with `body`: the exact bytes that were hashed.
    pub async fn history_from_raw(
        &self,
        workflow_id: &WorkflowId,
        from_seq: Seq,
    ) -> Result<Vec<HistoryEntry>, CallError> {
        self.history_pages(workflow_id, from_seq, true).await
    }

    async fn history_pages(
        &self,
        workflow_id: &WorkflowId,
        from_seq: Seq,
        raw: bool,
    ) -> Result<Vec<HistoryEntry>, CallError> {
        let mut events = Vec::new();
        let mut request = HistoryRequest {
            workflow_id: workflow_id.clone(),
            from_seq: Some(from_seq),
            limit: Some(HISTORY_PAGE),
            cursor: None,
            raw,
        };
        loop {
            let page = self.request(&request).await?;
            events.extend(page.events);
            match page.cursor {
                Some(cursor) => request.cursor = Some(cursor),
                None => return Ok(events),
            }
        }
    }

    /// Every workflow the filter selects, following the cursor.
    pub async fn list_all(&self, filter: ListRequest) -> Result<Vec<WorkflowView>, CallError> {
        let mut workflows = Vec::new();
        let mut request = ListRequest {
            limit: filter.limit.or(Some(WORKFLOW_PAGE)),
            ..filter
        };
        loop {
            let page = self.request(&request).await?;
            workflows.extend(page.workflows);
            match page.cursor {
                Some(cursor) => request.cursor = Some(cursor),
                None => return Ok(workflows),
            }
        }
    }
}
