//! `hcpflow bench`: submits workflows over NATS like any client and prints throughput,
//! latency (submit → terminal event) and Postgres write transactions per step. Figures are
//! printed, never asserted.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use futures::StreamExt;
use serde_json::json;
use tokio::sync::oneshot;

use hcpflow_engine::WorkflowId;
use hcpflow_protocol::subjects::Subjects;
use hcpflow_protocol::{ApiClient, NatsConfig, StartRequest};

#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// `noop_chain` or `noop_fanout`.
    #[arg(long, default_value = "noop_chain")]
    pub workflow: String,
    /// Steps per workflow (the chain length, or the fan-out width).
    #[arg(long, default_value_t = 10)]
    pub steps: u32,
    /// Workflows to run.
    #[arg(long, default_value_t = 1000)]
    pub count: u32,
    /// Workflows in flight at once.
    #[arg(long, default_value_t = 32)]
    pub concurrency: usize,
    /// Simulated work inside each activity (noop_chain only).
    #[arg(long, default_value_t = 0)]
    pub sleep_ms: u64,
    /// Make step N fail (noop_chain only): every run then rolls back and is expected to
    /// end `compensated`.
    #[arg(long)]
    pub fail_at: Option<u32>,
    /// Give up on a workflow after this many seconds.
    #[arg(long, default_value_t = 120)]
    pub timeout_secs: u64,
    /// Start at most this many workflows a second (`2000` or `2000/s`), besides
    /// `--concurrency`; by default as fast as the concurrency allows.
    #[arg(long, value_parser = parse_ramp)]
    pub ramp: Option<f64>,
    /// Hand the starts over on the durable submit stream (JetStream, acknowledged once
    /// stored) instead of the request/reply API: the way to submit very large batches.
    #[arg(long)]
    pub submit: bool,
    /// The servers' metrics addresses (`host:port`, comma-separated): their peak
    /// resident memory is read at the end and summed.
    #[arg(long, value_delimiter = ',')]
    pub server_metrics: Vec<String>,
}

/// `N` or `N/s`: starts per second.
fn parse_ramp(text: &str) -> Result<f64, String> {
    let number = text.strip_suffix("/s").unwrap_or(text);
    match number.trim().parse::<f64>() {
        Ok(rate) if rate > 0.0 && rate.is_finite() => Ok(rate),
        _ => Err(format!("{text:?}: expected starts per second, e.g. 2000/s")),
    }
}

/// Why a workflow of the run did not count as done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum FailureKind {
    /// The server answered the start with an error (`overloaded` for longer than the
    /// client's patience included).
    StartRefused,
    /// No answer to the start, sent three times with the same id.
    StartTimedOut,
    /// The start could not be sent (NATS).
    StartNotSent,
    /// It ended, but not as expected (failed, compensated when it should complete...).
    EndedOtherwise,
    /// No terminal event within `--timeout-secs`.
    DidNotFinish,
}

impl FailureKind {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::StartRefused => "start refused",
            Self::StartTimedOut => "start timed out",
            Self::StartNotSent => "start not sent",
            Self::EndedOtherwise => "ended otherwise",
            Self::DidNotFinish => "did not finish",
        }
    }
}

/// One workflow that did not count, and why.
#[derive(Debug, Clone)]
pub struct Failure {
    pub kind: FailureKind,
    pub message: String,
}

impl Failure {
    pub(crate) fn new(kind: FailureKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }
}

/// Hands out start times `1/rate` apart.
#[derive(Debug)]
struct Ramp {
    interval: Duration,
    next: Mutex<Instant>,
}

impl Ramp {
    fn new(rate: f64) -> Self {
        Self {
            interval: Duration::from_secs_f64(1.0 / rate),
            next: Mutex::new(Instant::now()),
        }
    }

    /// Waits until this start's turn.
    async fn wait_turn(&self) {
        let turn = {
            let Ok(mut next) = self.next.lock() else {
                return;
            };
            let turn = (*next).max(Instant::now());
            *next = turn + self.interval;
            turn
        };
        tokio::time::sleep_until(turn.into()).await;
    }
}

/// The runs waiting for their workflow's terminal event, by workflow id.
pub(crate) type Waiters = Arc<Mutex<HashMap<String, oneshot::Sender<String>>>>;

/// The measured figures of one run.
#[derive(Debug, Clone)]
pub struct BenchReport {
    pub completed: usize,
    pub failed: usize,
    /// Failures by kind, each with the first message of its kind.
    pub failures: std::collections::BTreeMap<FailureKind, (usize, String)>,
    /// Workflows of the run the database still shows unfinished at the end (with
    /// `--database-url`).
    pub unfinished: Option<i64>,
    /// The servers' summed peak resident memory (with `--server-metrics`).
    pub server_peak_rss: Option<u64>,
    pub elapsed: Duration,
    pub latencies: Vec<Duration>,
    pub steps: u64,
    /// Transactions that wrote (got a transaction id) during the run.
    pub commits: Option<i64>,
    /// Postgres's durability settings, when the bench could ask (`--database-url`).
    pub durability: Option<hcpflow_eventstore::Durability>,
    /// How the servers' writers reach Postgres, seen at the end of the run.
    pub transports: Option<hcpflow_eventstore::WriterTransports>,
}

pub async fn run(
    nats_config: &NatsConfig,
    prefix: &str,
    database_url: Option<&str>,
    args: &BenchArgs,
) -> anyhow::Result<BenchReport> {
    let input = match args.workflow.as_str() {
        "noop_chain" => {
            json!({"steps": args.steps, "sleep_ms": args.sleep_ms, "fail_at": args.fail_at})
        }
        "noop_fanout" => json!({"width": args.steps}),
        other => bail!("bench runs noop_chain or noop_fanout, not {other}"),
    };
    let api = ApiClient {
        client: hcpflow_protocol::connect(nats_config, "hcpflow-bench").await?,
        subjects: Subjects::new(prefix)?,
        tenant: hcpflow_engine::TenantId::default_tenant(),
    };
    let waiters: Waiters = Arc::new(Mutex::new(HashMap::new()));
    let router = route_terminal_events(&api, waiters.clone()).await?;
    let store = match database_url {
        Some(url) => Some(
            hcpflow_eventstore::EventStore::connect(url, 1)
                .await
                .context("connecting to Postgres for the commit count")?,
        ),
        None => None,
    };
    let commits_before = match &store {
        Some(store) => Some(store.next_transaction_id().await?),
        None => None,
    };
    let durability = match &store {
        Some(store) => Some(store.durability().await?),
        None => None,
    };

    let run_id = format!("bench-{}", chrono::Utc::now().format("%Y%m%d%H%M%S%3f"));
    let ramp = args.ramp.map(Ramp::new);
    let started = Instant::now();
    let outcomes: Vec<Result<Duration, Failure>> = futures::stream::iter(0..args.count)
        .map(|n| {
            let request = StartRequest {
                workflow_type: args.workflow.clone(),
                workflow_id: WorkflowId::new(format!("{run_id}-{n}")).ok(),
                input: input.clone(),
                parent: None,
            };
            let (api, waiters, ramp) = (&api, &waiters, ramp.as_ref());
            async move {
                if let Some(ramp) = ramp {
                    ramp.wait_turn().await;
                }
                run_one(api, waiters, request, args).await
            }
        })
        .buffer_unordered(args.concurrency.max(1))
        .collect()
        .await;
    let elapsed = started.elapsed();
    router.abort();

    let commits = match (&store, commits_before) {
        (Some(store), Some(before)) => Some(store.next_transaction_id().await? - before),
        _ => None,
    };
    let mut report = BenchReport::tally(outcomes, elapsed, args.steps, commits);
    report.durability = durability;
    if let Some(store) = &store {
        // A diagnostic: a refusal (a role that may not see the others' sessions) costs
        // the line, not the run's report.
        report.transports = store.writer_transports().await.ok();
        report.unfinished = Some(store.count_unfinished_with_prefix(&run_id).await?);
    }
    if !args.server_metrics.is_empty() {
        report.server_peak_rss = Some(
            servers_gauge_sum(
                &args.server_metrics,
                "hcpflow_process_peak_resident_memory_bytes",
            )
            .await?,
        );
    }
    Ok(report)
}

/// The sum over the servers of one gauge of their `/metrics` (e.g.
/// `hcpflow_process_peak_resident_memory_bytes`).
pub(crate) async fn servers_gauge_sum(addresses: &[String], gauge: &str) -> anyhow::Result<u64> {
    Ok(servers_metric_sum(addresses, gauge).await? as u64)
}

/// The sum over the servers of one sample of their `/metrics`, as it reads (a gauge, a
/// counter, or a histogram's `_sum` or `_count`).
pub(crate) async fn servers_metric_sum(addresses: &[String], metric: &str) -> anyhow::Result<f64> {
    let mut total = 0.0;
    for address in addresses {
        let text = crate::runtime::ops_http::get_text(address, "/metrics")
            .await
            .with_context(|| format!("reading the metrics of {address}"))?;
        let value = text
            .lines()
            .find_map(|line| line.strip_prefix(metric)?.strip_prefix(' '))
            .and_then(|value| value.trim().parse::<f64>().ok())
            .with_context(|| format!("{address} reports no {metric}"))?;
        total += value;
    }
    Ok(total)
}

/// The two fields of an events-stream entry the bench reads. The client shares the
/// machine it measures, so it decodes no more of every event than this: the rest (the
/// data above all) is skipped, not built.
#[derive(serde::Deserialize)]
struct EventKind<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default, borrow)]
    workflow_id: Option<Cow<'a, str>>,
}

/// Hands each terminal event on the events stream to the run waiting for it.
pub(crate) async fn route_terminal_events(
    api: &ApiClient,
    waiters: Waiters,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let mut events = api.client.subscribe(api.subjects.events_all()).await?;
    Ok(tokio::spawn(async move {
        while let Some(message) = events.next().await {
            let Ok(entry) = serde_json::from_slice::<EventKind<'_>>(&message.payload) else {
                continue;
            };
            if !hcpflow_engine::Event::is_terminal_kind(&entry.kind) {
                continue;
            }
            let Some(id) = entry.workflow_id else {
                continue;
            };
            let waiter = waiters.lock().ok().and_then(|mut w| w.remove(id.as_ref()));
            if let Some(waiter) = waiter {
                let _ = waiter.send(entry.kind.into_owned());
            }
        }
    }))
}

/// Starts one workflow and waits for its terminal event: its latency, or why not.
async fn run_one(
    api: &ApiClient,
    waiters: &Waiters,
    request: StartRequest,
    args: &BenchArgs,
) -> Result<Duration, Failure> {
    let Some(workflow_id) = request.workflow_id.clone() else {
        return Err(Failure::new(
            FailureKind::StartNotSent,
            "the bench made an invalid workflow id",
        ));
    };
    let timeout = Duration::from_secs(args.timeout_secs);
    let expected = if args.fail_at.is_some() {
        "WorkflowCompensated"
    } else {
        "WorkflowCompleted"
    };
    let (sender, receiver) = oneshot::channel();
    if let Ok(mut w) = waiters.lock() {
        w.insert(workflow_id.to_string(), sender);
    }
    let begin = Instant::now();
    let sent = if args.submit {
        submit(api, &request).await
    } else {
        start(api, &request).await
    };
    if let Err(failure) = sent {
        if let Ok(mut w) = waiters.lock() {
            w.remove(workflow_id.as_str());
        }
        return Err(failure);
    }
    match tokio::time::timeout(timeout, receiver).await {
        Ok(Ok(kind)) if kind == expected => Ok(begin.elapsed()),
        Ok(Ok(kind)) => Err(Failure::new(
            FailureKind::EndedOtherwise,
            format!("{workflow_id} ended with {kind}"),
        )),
        _ => Err(Failure::new(
            FailureKind::DidNotFinish,
            format!("{workflow_id} did not finish in {timeout:?}"),
        )),
    }
}

/// How many times a start or a submission is sent with the same id when no answer comes:
/// the server records it once however many arrive.
const SEND_ATTEMPTS: usize = 3;

/// Starts through the API. `overloaded` is retried by the client itself; a start left
/// unanswered is sent again with the same id.
pub(crate) async fn start(api: &ApiClient, request: &StartRequest) -> Result<(), Failure> {
    use hcpflow_protocol::CallError;
    let mut attempt = 1;
    loop {
        match api.request(request).await {
            Ok(_) => return Ok(()),
            Err(CallError::TimedOut { .. }) if attempt < SEND_ATTEMPTS => attempt += 1,
            Err(error @ CallError::TimedOut { .. }) => {
                return Err(Failure::new(
                    FailureKind::StartTimedOut,
                    format!("start, sent {SEND_ATTEMPTS} times: {error}"),
                ))
            }
            Err(error @ CallError::Refused(_)) => {
                return Err(Failure::new(
                    FailureKind::StartRefused,
                    format!("start: {error}"),
                ))
            }
            Err(error) => {
                return Err(Failure::new(
                    FailureKind::StartNotSent,
                    format!("start: {error}"),
                ))
            }
        }
    }
}

/// Publishes the start on the submit stream, its workflow id as `Nats-Msg-Id`, and waits
/// until JetStream has stored it; an unacknowledged publish is sent again (JetStream
/// drops the copy).
async fn submit(api: &ApiClient, request: &StartRequest) -> Result<(), Failure> {
    let js = async_nats::jetstream::new(api.client.clone());
    let body = serde_json::to_vec(request).unwrap_or_default();
    let id = request
        .workflow_id
        .as_ref()
        .map(ToString::to_string)
        .unwrap_or_default();
    let mut attempt = 1;
    loop {
        let mut headers = async_nats::HeaderMap::new();
        headers.insert("Nats-Msg-Id", id.as_str());
        let stored = match js
            .publish_with_headers(api.subjects.submit_start(), headers, body.clone().into())
            .await
        {
            Ok(ack) => ack.await.map(|_| ()).map_err(|e| e.to_string()),
            Err(error) => Err(error.to_string()),
        };
        match stored {
            Ok(()) => return Ok(()),
            Err(_) if attempt < SEND_ATTEMPTS => attempt += 1,
            Err(error) => {
                return Err(Failure::new(
                    FailureKind::StartTimedOut,
                    format!("submit, sent {SEND_ATTEMPTS} times: {error}"),
                ))
            }
        }
    }
}

/// The `p` quantile (0–1) of latencies sorted in ascending order; none of none.
pub(crate) fn percentile_of_sorted(sorted: &[Duration], p: f64) -> Option<Duration> {
    let last = sorted.len().checked_sub(1)?;
    let index = (last as f64 * p).round() as usize;
    sorted.get(index.min(last)).copied()
}

impl BenchReport {
    /// The report of a run: latencies sorted, failures counted by kind.
    fn tally(
        outcomes: Vec<Result<Duration, Failure>>,
        elapsed: Duration,
        steps: u32,
        commits: Option<i64>,
    ) -> Self {
        let mut latencies = Vec::new();
        let mut failures = std::collections::BTreeMap::new();
        let mut failed = 0;
        for outcome in outcomes {
            match outcome {
                Ok(latency) => latencies.push(latency),
                Err(failure) => {
                    failed += 1;
                    failures
                        .entry(failure.kind)
                        .or_insert((0, failure.message))
                        .0 += 1;
                }
            }
        }
        latencies.sort();
        BenchReport {
            completed: latencies.len(),
            failed,
            failures,
            unfinished: None,
            server_peak_rss: None,
            elapsed,
            steps: latencies.len() as u64 * u64::from(steps),
            latencies,
            commits,
            durability: None,
            transports: None,
        }
    }

    fn percentile(&self, p: f64) -> Duration {
        percentile_of_sorted(&self.latencies, p).unwrap_or_default()
    }

    pub fn print(&self, args: &BenchArgs) {
        let seconds = self.elapsed.as_secs_f64().max(f64::EPSILON);
        println!(
            "bench: {} x {} (steps {}, concurrency {}{})",
            args.count,
            args.workflow,
            args.steps,
            args.concurrency,
            args.fail_at
                .map(|n| format!(", failing at step {n}"))
                .unwrap_or_default()
        );
        println!(
            "  completed      {} ({} failed) in {:.2} s",
            self.completed, self.failed, seconds
        );
        for (kind, (count, example)) in &self.failures {
            println!("  {:<14} {count}  (e.g. {example})", kind.label());
        }
        if let Some(rate) = args.ramp {
            println!("  ramp           {rate} starts/s");
        }
        if args.submit {
            println!("  submitted      on the durable submit stream");
        }
        println!("  workflows/s    {:.1}", self.completed as f64 / seconds);
        println!("  steps/s        {:.1}", self.steps as f64 / seconds);
        println!(
            "  latency p50    {:.1} ms",
            self.percentile(0.50).as_secs_f64() * 1000.0
        );
        println!(
            "  latency p99    {:.1} ms",
            self.percentile(0.99).as_secs_f64() * 1000.0
        );
        match self.commits {
            Some(commits) if self.steps > 0 => println!(
                "  pg write txns  {commits} ({:.2} per step)",
                commits as f64 / self.steps as f64
            ),
            _ => println!(
                "  pg write txns  (give --database-url or HCPFLOW_DATABASE_URL to count them)"
            ),
        }
        match &self.durability {
            Some(durability) if durability.is_durable() => println!(
                "  postgres       durable (fsync {}, synchronous_commit {})",
                durability.fsync, durability.synchronous_commit
            ),
            Some(durability) => println!(
                "  postgres       NOT DURABLE (fsync {}, synchronous_commit {}): these figures do not compare with engines that fsync",
                durability.fsync, durability.synchronous_commit
            ),
            None => println!("  postgres       durability unknown (give --database-url)"),
        }
        if let Some(transports) = &self.transports {
            println!("  pg writers     over {transports}");
        }
        if let Some(unfinished) = self.unfinished {
            println!("  unfinished     {unfinished} (of this run, still running in the database)");
        }
        if let Some(bytes) = self.server_peak_rss {
            println!("  server RSS     {} MiB at most", bytes >> 20);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the events stream carries (a history entry with its workflow id) reads as
    /// its kind and id, whatever its data holds (escapes included).
    #[test]
    fn an_events_stream_entry_reads_as_its_kind_and_workflow() {
        let entry = hcpflow_protocol::HistoryEntry {
            seq: hcpflow_engine::Seq::FIRST,
            kind: "WorkflowCompleted".into(),
            recorded_at: "2026-11-28T10:52:44.123456Z".into(),
            data: json!({"v": 1, "output": {"quote": "a \"b\" \\ c", "n": [1, 2]}}),
            hash: "ab".into(),
            prev_hash: "cd".into(),
            workflow_id: Some(WorkflowId::new("wf-1").unwrap()),
            body: None,
        };
        let bytes = serde_json::to_vec(&entry).unwrap();
        let read: EventKind<'_> = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(read.kind, "WorkflowCompleted");
        assert_eq!(read.workflow_id.as_deref(), Some("wf-1"));
    }
}
