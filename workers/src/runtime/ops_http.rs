//! The process's HTTP endpoint for operators (`--metrics-addr`):
//!
//! - `GET /metrics`: the OpenMetrics text of [`Metrics`];
//! - `GET /healthz` (liveness): 200 while the process serves (it stops serving when it
//!   stops). It asks nothing of Postgres or NATS: an outage of either is for readiness
//!   to report, and restarting every process because the database is away helps nobody;
//! - `GET /readyz` (readiness): 200 when Postgres answers with the schema at the version
//!   this build needs (or newer) and the NATS server answers for the tasks stream; 503
//!   otherwise. The body names each check and what it found, as JSON.
//!
//! A small HTTP/1.1 responder, not a framework: one request per connection, at most
//! [`MAX_CONNECTIONS`] at once, each given [`REQUEST_WAIT`] to speak.

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream;
use hcpflow_eventstore::{migrate, EventStore};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};

use crate::runtime::metrics::{Metrics, CONTENT_TYPE};

/// How long a client may take to send its request (and to take the reply).
const REQUEST_WAIT: Duration = Duration::from_secs(5);
/// Connections served at once.
const MAX_CONNECTIONS: usize = 32;
/// How long one readiness check may take: a probe's own timeout is a few seconds.
const CHECK_WAIT: Duration = Duration::from_secs(2);

/// What readiness looks at.
#[derive(Debug, Clone)]
pub struct Readiness {
    /// A store of its own (one connection): a probe must not wait behind the steps for
    /// a pooled connection, nor take one from them.
    pub store: EventStore,
    pub js: jetstream::Context,
    /// The stream every role uses (`HCPFLOW_TASKS` for the default prefix).
    pub tasks_stream: String,
}

/// One check's finding.
#[derive(Debug, PartialEq)]
struct Check {
    name: &'static str,
    ok: bool,
    detail: String,
}

impl Readiness {
    async fn checks(&self) -> Vec<Check> {
        let (postgres, nats) = tokio::join!(self.postgres(), self.nats());
        vec![postgres, nats]
    }

    async fn postgres(&self) -> Check {
        let serves = migrate::schema_serves_this_build(self.store.pool());
        let (ok, detail) = match tokio::time::timeout(CHECK_WAIT, serves).await {
            Err(_) => (false, format!("no answer within {CHECK_WAIT:?}")),
            Ok(Err(why)) => (false, why),
            Ok(Ok(applied)) => (true, format!("schema at migration {applied}")),
        };
        Check {
            name: "postgres",
            ok,
            detail,
        }
    }

    async fn nats(&self) -> Check {
        let info = tokio::time::timeout(CHECK_WAIT, self.js.get_stream(&self.tasks_stream)).await;
        let (ok, detail) = match info {
            Err(_) => (false, format!("no answer within {CHECK_WAIT:?}")),
            Ok(Err(error)) => (false, format!("stream {}: {error}", self.tasks_stream)),
            Ok(Ok(_)) => (true, format!("stream {} answers", self.tasks_stream)),
        };
        Check {
            name: "nats",
            ok,
            detail,
        }
    }
}

/// Serves the endpoints on `listener` until shutdown. The caller binds it: the endpoint
/// then takes connections from the moment the caller goes on (the server binds it
/// before its API answers), and a port that is taken fails the start.
pub async fn serve(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    readiness: Readiness,
    mut shutdown: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(%addr, "serving /metrics, /healthz and /readyz");
    }
    let connections = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let readiness = Arc::new(readiness);
    loop {
        tokio::select! {
            _ = shutdown.changed() => return Ok(()),
            accepted = listener.accept() => {
                let Ok((mut socket, _)) = accepted else { continue };
                // At most so many at once; a connection beyond them is closed at once.
                let Ok(permit) = connections.clone().try_acquire_owned() else { continue };
                let (metrics, readiness) = (metrics.clone(), readiness.clone());
                tokio::spawn(async move {
                    // A client that says nothing is let go: an idle connection must not
                    // hold a task for ever.
                    let mut request = [0u8; 1024];
                    let read = tokio::time::timeout(REQUEST_WAIT, socket.read(&mut request)).await;
                    if let Ok(Ok(read)) = read {
                        let head = String::from_utf8_lossy(&request[..read]);
                        let response = respond(&head, &metrics, &readiness).await;
                        let _ = tokio::time::timeout(
                            REQUEST_WAIT,
                            socket.write_all(response.as_bytes()),
                        )
                        .await;
                    }
                    drop(permit);
                });
            }
        }
    }
}

/// The body of `GET path` on another process's endpoint at `addr` (`host:port`), if it
/// answers 200 within [`REQUEST_WAIT`] (`hcpflow bench` reads the servers' metrics).
pub async fn get_text(addr: &str, path: &str) -> anyhow::Result<String> {
    use anyhow::Context;
    let exchange = async {
        let mut socket = tokio::net::TcpStream::connect(addr).await?;
        let request = format!("GET {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\r\n");
        socket.write_all(request.as_bytes()).await?;
        let mut response = Vec::new();
        socket.read_to_end(&mut response).await?;
        anyhow::Ok(String::from_utf8_lossy(&response).into_owned())
    };
    let response = tokio::time::timeout(REQUEST_WAIT, exchange)
        .await
        .context("no answer in time")??;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .context("not an HTTP response")?;
    let status = head.lines().next().unwrap_or_default();
    anyhow::ensure!(status.starts_with("HTTP/1.1 200"), "answered {status}");
    Ok(body.to_owned())
}

/// The endpoint a request starting with `head` asks for.
#[derive(Debug, PartialEq, Eq)]
enum Endpoint {
    Metrics,
    Health,
    Ready,
    Unknown,
}

fn endpoint(head: &str) -> Endpoint {
    let path = head
        .strip_prefix("GET ")
        .and_then(|rest| rest.split_whitespace().next())
        .map(|target| target.split('?').next().unwrap_or(target));
    match path {
        Some("/metrics") => Endpoint::Metrics,
        Some("/healthz") => Endpoint::Health,
        Some("/readyz") => Endpoint::Ready,
        _ => Endpoint::Unknown,
    }
}

/// The whole HTTP/1.1 response to a request starting with `head`.
async fn respond(head: &str, metrics: &Metrics, readiness: &Readiness) -> String {
    match endpoint(head) {
        Endpoint::Metrics => response("200 OK", CONTENT_TYPE, &metrics.render()),
        Endpoint::Health => json_response(true, &json!({"status": "ok"})),
        Endpoint::Ready => {
            let checks = readiness.checks().await;
            json_response(
                checks.iter().all(|check| check.ok),
                &readiness_body(&checks),
            )
        }
        Endpoint::Unknown => response("404 Not Found", "text/plain; charset=utf-8", ""),
    }
}

fn readiness_body(checks: &[Check]) -> serde_json::Value {
    let ready = checks.iter().all(|check| check.ok);
    let findings: serde_json::Map<String, serde_json::Value> = checks
        .iter()
        .map(|check| {
            let finding = json!({"ok": check.ok, "detail": check.detail});
            (check.name.to_owned(), finding)
        })
        .collect();
    json!({"status": if ready { "ready" } else { "not_ready" }, "checks": findings})
}

fn json_response(ok: bool, body: &serde_json::Value) -> String {
    let status = if ok {
        "200 OK"
    } else {
        "503 Service Unavailable"
    };
    response(status, "application/json", &format!("{body}\n"))
}

fn response(status: &str, content_type: &str, body: &str) -> String {
    format!(
        "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_name_their_endpoint_by_path_alone() {
        assert_eq!(
            endpoint("GET /metrics HTTP/1.1\r\nhost: x\r\n\r\n"),
            Endpoint::Metrics
        );
        assert_eq!(endpoint("GET /healthz HTTP/1.1\r\n\r\n"), Endpoint::Health);
        assert_eq!(
            endpoint("GET /readyz?verbose HTTP/1.1\r\n\r\n"),
            Endpoint::Ready
        );
        assert_eq!(endpoint("GET /readyzz HTTP/1.1\r\n\r\n"), Endpoint::Unknown);
        assert_eq!(endpoint("POST /readyz HTTP/1.1\r\n\r\n"), Endpoint::Unknown);
        assert_eq!(endpoint("GET / HTTP/1.1\r\n\r\n"), Endpoint::Unknown);
        assert_eq!(endpoint(""), Endpoint::Unknown);
    }

    #[test]
    fn readiness_is_every_check_and_names_the_failing_one() {
        let checks = [
            Check {
                name: "postgres",
                ok: true,
                detail: "schema at migration 13".into(),
            },
            Check {
                name: "nats",
                ok: false,
                detail: "no answer within 2s".into(),
            },
        ];
        let body = readiness_body(&checks);
        assert_eq!(body["status"], "not_ready");
        assert_eq!(body["checks"]["nats"]["ok"], false);
        assert_eq!(body["checks"]["nats"]["detail"], "no answer within 2s");
        assert_eq!(body["checks"]["postgres"]["ok"], true);
        assert_eq!(readiness_body(&checks[..1])["status"], "ready");
        let answer = json_response(false, &body);
        assert!(
            answer.starts_with("HTTP/1.1 503 Service Unavailable\r\n"),
            "{answer}"
        );
        let (head, sent) = answer.split_once("\r\n\r\n").unwrap();
        assert!(head.contains(&format!("\r\ncontent-length: {}\r\n", sent.len())));
    }

    #[test]
    fn metrics_answer_in_openmetrics_text() {
        let metrics = Metrics::default();
        metrics.api_requests.inc();
        let answer = response("200 OK", CONTENT_TYPE, &metrics.render());
        let (head, body) = answer.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
        assert!(head.contains(&format!("\r\ncontent-type: {CONTENT_TYPE}\r\n")));
        assert!(head.contains(&format!("\r\ncontent-length: {}\r\n", body.len())));
        assert!(body.contains("hcpflow_api_requests_total 1"), "{body}");
    }
}
