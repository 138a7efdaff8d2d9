//! `hcpflow bench`: submits workflows over NATS like any client and prints throughput,
//! latency (submit → terminal event) and Postgres write transactions per step. Figures are
//! printed, never asserted.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use futures::StreamExt;
use serde_json::json;
use tokio::sync::oneshot;

use hcpflow_engine::WorkflowId;
use hcpflow_protocol::subjects::Subjects;
use hcpflow_protocol::{ApiClient, HistoryEntry, NatsConfig, StartRequest};

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
}

type Waiters = Arc<Mutex<HashMap<String, oneshot::Sender<String>>>>;

/// The measured figures of one run.
#[derive(Debug, Clone)]
pub struct BenchReport {
    pub completed: usize,
    pub failed: usize,
    pub elapsed: Duration,
    pub latencies: Vec<Duration>,
    pub steps: u64,
    /// Transactions that wrote (got a transaction id) during the run.
    pub commits: Option<i64>,
    /// Postgres's durability settings, when the bench could ask (`--database-url`).
    pub durability: Option<hcpflow_eventstore::Durability>,
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
    let started = Instant::now();
    let outcomes: Vec<Result<Duration, String>> = futures::stream::iter(0..args.count)
        .map(|n| {
            let request = StartRequest {
                workflow_type: args.workflow.clone(),
                workflow_id: WorkflowId::new(format!("{run_id}-{n}")).ok(),
                input: input.clone(),
                parent: None,
            };
            run_one(&api, &waiters, request, args)
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
    Ok(report)
}

/// Hands each terminal event on the events stream to the run waiting for it.
async fn route_terminal_events(
    api: &ApiClient,
    waiters: Waiters,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let mut events = api.client.subscribe(api.subjects.events_all()).await?;
    Ok(tokio::spawn(async move {
        while let Some(message) = events.next().await {
            let Ok(entry) = serde_json::from_slice::<HistoryEntry>(&message.payload) else {
                continue;
            };
            if !hcpflow_engine::Event::is_terminal_kind(&entry.kind) {
                continue;
            }
            let Some(id) = entry.workflow_id else {
                continue;
            };
            let waiter = waiters.lock().ok().and_then(|mut w| w.remove(id.as_str()));
            if let Some(waiter) = waiter {
                let _ = waiter.send(entry.kind);
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
) -> Result<Duration, String> {
    let Some(workflow_id) = request.workflow_id.clone() else {
        return Err("the bench made an invalid workflow id".into());
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
    api.request(&request)
        .await
        .map_err(|e| format!("start of {workflow_id}: {e}"))?;
    match tokio::time::timeout(timeout, receiver).await {
        Ok(Ok(kind)) if kind == expected => Ok(begin.elapsed()),
        Ok(Ok(kind)) => Err(format!("{workflow_id} ended with {kind}")),
        _ => Err(format!("{workflow_id} did not finish in {timeout:?}")),
    }
}

impl BenchReport {
    /// The report of a run: latencies sorted, the first five failures printed.
    fn tally(
        outcomes: Vec<Result<Duration, String>>,
        elapsed: Duration,
        steps: u32,
        commits: Option<i64>,
    ) -> Self {
        let mut latencies = Vec::new();
        let mut failed = 0;
        for outcome in outcomes {
            match outcome {
                Ok(latency) => latencies.push(latency),
                Err(error) => {
                    failed += 1;
                    if failed <= 5 {
                        eprintln!("bench: {error}");
                    }
                }
            }
        }
        latencies.sort();
        BenchReport {
            completed: latencies.len(),
            failed,
            elapsed,
            steps: latencies.len() as u64 * u64::from(steps),
            latencies,
            commits,
            durability: None,
        }
    }

    fn percentile(&self, p: f64) -> Duration {
        if self.latencies.is_empty() {
            return Duration::ZERO;
        }
        let index = ((self.latencies.len() as f64 - 1.0) * p).round() as usize;
        self.latencies[index.min(self.latencies.len() - 1)]
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
    }
}
