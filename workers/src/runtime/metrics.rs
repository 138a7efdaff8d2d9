//! Prometheus metrics: counters and a latency summary, served as text on `/metrics`.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::watch;

#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    pub fn inc(&self) {
        self.add(1);
    }

    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }

    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A value that goes up and down.
#[derive(Debug, Default)]
pub struct Gauge(AtomicU64);

impl Gauge {
    pub fn set(&self, value: u64) {
        self.0.store(value, Ordering::Relaxed);
    }

    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Sum and count of durations in microseconds (a Prometheus summary without quantiles).
#[derive(Debug, Default)]
pub struct Timing {
    sum_micros: AtomicU64,
    count: AtomicU64,
}

impl Timing {
    pub fn record(&self, elapsed: std::time::Duration) {
        self.sum_micros.fetch_add(
            u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
        self.count.fetch_add(1, Ordering::Relaxed);
    }
}

#[derive(Debug, Default)]
pub struct Metrics {
    pub workflow_tasks: Counter,
    pub activity_tasks: Counter,
    pub eager_tasks: Counter,
    pub redeliveries: Counter,
    pub conflicts: Counter,
    pub published: Counter,
    pub relayed: Counter,
    pub blocked: Counter,
    pub duplicates_dropped: Counter,
    pub api_requests: Counter,
    pub api_errors: Counter,
    pub dead_lettered: Counter,
    pub swept: Counter,
    pub timers_fired: Counter,
    /// Age in milliseconds of the oldest row the relay last had to publish; 0 when it
    /// found none.
    pub outbox_lag_ms: Gauge,
    pub workflow_task_time: Timing,
    pub activity_time: Timing,
}

impl Metrics {
    pub fn render(&self) -> String {
        let mut out = String::new();
        let counters: [(&str, &str, &Counter); 14] = [
            (
                "hcpflow_workflow_tasks_total",
                "workflow tasks run",
                &self.workflow_tasks,
            ),
            (
                "hcpflow_activity_tasks_total",
                "activity attempts run",
                &self.activity_tasks,
            ),
            (
                "hcpflow_eager_activity_tasks_total",
                "activity tasks run where they were scheduled, without a trip through NATS",
                &self.eager_tasks,
            ),
            (
                "hcpflow_redeliveries_total",
                "tasks NATS delivered more than once",
                &self.redeliveries,
            ),
            (
                "hcpflow_append_conflicts_total",
                "appends that lost a race and were retried",
                &self.conflicts,
            ),
            (
                "hcpflow_outbox_published_total",
                "outbox rows and events published right after commit",
                &self.published,
            ),
            (
                "hcpflow_outbox_relayed_total",
                "outbox rows and events published by the relay (what a crash left behind)",
                &self.relayed,
            ),
            (
                "hcpflow_blocked_total",
                "workflows blocked by nondeterminism or a panic",
                &self.blocked,
            ),
            (
                "hcpflow_duplicate_outcomes_dropped_total",
                "activity outcomes recorded already",
                &self.duplicates_dropped,
            ),
            (
                "hcpflow_api_requests_total",
                "API requests",
                &self.api_requests,
            ),
            (
                "hcpflow_api_errors_total",
                "API requests answered with an error",
                &self.api_errors,
            ),
            (
                "hcpflow_dead_lettered_total",
                "submissions rejected to the dead-letter stream",
                &self.dead_lettered,
            ),
            (
                "hcpflow_swept_total",
                "workflows the sweeper re-enqueued",
                &self.swept,
            ),
            (
                "hcpflow_timers_fired_total",
                "timers and retry backoffs fired",
                &self.timers_fired,
            ),
        ];
        for (name, help, counter) in counters {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}",
                counter.get()
            );
        }
        let _ = writeln!(
            out,
            "# HELP hcpflow_outbox_lag_milliseconds age of the oldest outbox row or unpublished event the relay last found\n# TYPE hcpflow_outbox_lag_milliseconds gauge\nhcpflow_outbox_lag_milliseconds {}",
            self.outbox_lag_ms.get()
        );
        for (name, timing) in [
            ("hcpflow_workflow_task_seconds", &self.workflow_task_time),
            ("hcpflow_activity_seconds", &self.activity_time),
        ] {
            let sum = timing.sum_micros.load(Ordering::Relaxed) as f64 / 1e6;
            let count = timing.count.load(Ordering::Relaxed);
            let _ = writeln!(
                out,
                "# TYPE {name} summary\n{name}_sum {sum}\n{name}_count {count}"
            );
        }
        out
    }
}

/// Serves `GET /metrics` until shutdown.
pub async fn serve(
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    mut shutdown: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let listener = TcpListener::bind(addr).await?;
    tracing::info!(%addr, "serving metrics");
    loop {
        tokio::select! {
            _ = shutdown.changed() => return Ok(()),
            accepted = listener.accept() => {
                let Ok((mut socket, _)) = accepted else { continue };
                let metrics = metrics.clone();
                tokio::spawn(async move {
                    let mut request = [0u8; 1024];
                    let read = socket.read(&mut request).await.unwrap_or(0);
                    let head = String::from_utf8_lossy(&request[..read]);
                    let response = if head.starts_with("GET /metrics") {
                        let body = metrics.render();
                        format!("HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len())
                    } else {
                        "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".to_owned()
                    };
                    let _ = socket.write_all(response.as_bytes()).await;
                });
            }
        }
    }
}
