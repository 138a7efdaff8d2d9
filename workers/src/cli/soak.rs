//! `hcpflow soak`: a mixed load held for a long time at a fraction of the measured
//! capacity. Every minute it prints throughput, latency, the servers' resident memory
//! and the sizes of the tables and streams; at the end it says whether anything failed
//! and whether memory, latency or storage per workflow grew over the last half.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use rand::Rng;
use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot};

use hcpflow_engine::WorkflowId;
use hcpflow_eventstore::{EventStore, TableSize};
use hcpflow_protocol::subjects::{StreamRole, Subjects};
use hcpflow_protocol::{ApiClient, CallError, NatsConfig, SignalRequest, StartRequest};

use crate::cli::bench::{self, Failure, FailureKind, Waiters};

#[derive(Debug, Clone, clap::Args)]
pub struct SoakArgs {
    /// How long the load runs, in minutes.
    #[arg(long, default_value_t = 20)]
    pub minutes: u64,
    /// The fraction of the measured capacity the load runs at: the steps/s of the same
    /// mix with `--measure-in-flight` workflows in flight, as many as the server takes.
    #[arg(long, default_value_t = 0.7)]
    pub load: f64,
    /// Run at this many steps a second instead of measuring the capacity first.
    #[arg(long)]
    pub steps_per_sec: Option<f64>,
    /// Seconds the capacity measurement runs (its first quarter is not counted).
    #[arg(long, default_value_t = 60)]
    pub measure_secs: u64,
    /// Workflows in flight during the capacity measurement.
    #[arg(long, default_value_t = 256)]
    pub measure_in_flight: usize,
    /// The servers' metrics addresses (`host:port`, comma-separated): their resident
    /// memory is read every minute and summed.
    #[arg(long, value_delimiter = ',')]
    pub server_metrics: Vec<String>,
    /// Give up on a workflow after this many seconds.
    #[arg(long, default_value_t = 300)]
    pub timeout_secs: u64,
    /// Starts are held back (and counted as failures) while this many are in flight: the
    /// server is not keeping up with the load.
    #[arg(long, default_value_t = 20_000)]
    pub max_in_flight: usize,
}

/// One kind of workflow of the mix.
#[derive(Debug, Clone)]
struct Kind {
    label: &'static str,
    workflow_type: &'static str,
    input: Value,
    /// Activities it runs (compensations included): its share of the steps.
    activities: u32,
    expected: &'static str,
    /// Send it the signal `go` at a random moment of its first four seconds.
    signal: bool,
    /// How many of every [`MIX_CYCLE`] starts are of this kind.
    per_cycle: usize,
}

/// Starts per cycle of the mix.
const MIX_CYCLE: usize = 20;

/// The kind whose latency the per-minute p50/p99 follow: the most common, and the one
/// `hcpflow bench` measures.
const CHAIN: &str = "chain";

fn mix() -> Vec<Kind> {
    let kind = |label, workflow_type, input, activities, per_cycle| Kind {
        label,
        workflow_type,
        input,
        activities,
        expected: "WorkflowCompleted",
        signal: false,
        per_cycle,
    };
    vec![
        kind(CHAIN, "noop_chain", json!({"steps": 10}), 10, 13),
        kind("fanout", "noop_fanout", json!({"width": 10}), 10, 2),
        Kind {
            signal: true,
            ..kind(
                "timer+signal",
                "noop_wait",
                json!({"timer_ms": 2000, "signal": "go"}),
                1,
                3,
            )
        },
        Kind {
            expected: "WorkflowCompensated",
            ..kind(
                "compensated",
                "noop_chain",
                json!({"steps": 5, "fail_at": 3}),
                5,
                1,
            )
        },
        kind(
            "parent",
            "noop_parent",
            json!({"children": 2, "steps": 3}),
            6,
            1,
        ),
    ]
}

/// The mix in the order its starts go out: the kinds interleaved, not in runs.
fn schedule(kinds: &[Kind]) -> Vec<usize> {
    let mut order: Vec<(f64, usize)> = Vec::new();
    for (index, kind) in kinds.iter().enumerate() {
        for n in 0..kind.per_cycle {
            order.push(((n as f64 + 0.5) / kind.per_cycle as f64, index));
        }
    }
    order.sort_by(|a, b| a.0.total_cmp(&b.0));
    order.into_iter().map(|(_, index)| index).collect()
}

/// What became of one workflow of the load.
#[derive(Debug)]
struct Outcome {
    kind: usize,
    result: Result<Duration, Failure>,
}

/// A reading of everything that could grow.
#[derive(Debug, Clone, Default)]
struct Sample {
    rss_bytes: Option<u64>,
    /// The servers' counters, for the per-minute rates: append conflicts (a cached
    /// history found stale: a read and a decision again), and the workflow tasks'
    /// total seconds and count (how long a step takes inside the server).
    engine: Option<EngineCounters>,
    /// The soak's ended workflows whose last event is not signed yet (the
    /// checkpointer's backlog), and those signed.
    unsigned_ended: i64,
    signed_ended: i64,
    tables: Vec<TableSize>,
    streams: Vec<StreamSize>,
}

#[derive(Debug, Clone, Copy, Default)]
struct EngineCounters {
    conflicts: f64,
    step_seconds: f64,
    steps: f64,
}

impl EngineCounters {
    /// Conflicts a second and the mean step in ms, between `before` and `self`.
    fn rates_since(&self, before: &Self, seconds: f64) -> (f64, f64) {
        let steps = self.steps - before.steps;
        let mean_ms = if steps > 0.0 {
            (self.step_seconds - before.step_seconds) / steps * 1000.0
        } else {
            0.0
        };
        (
            (self.conflicts - before.conflicts) / seconds.max(1e-9),
            mean_ms,
        )
    }
}

#[derive(Debug, Clone)]
struct StreamSize {
    name: String,
    bytes: u64,
    messages: u64,
    /// A work queue holds only what is not yet consumed: it must stay flat.
    work_queue: bool,
}

impl Sample {
    fn table_bytes(&self) -> i64 {
        self.tables.iter().map(TableSize::total).sum()
    }

    fn stream_bytes(&self) -> u64 {
        self.streams.iter().map(|s| s.bytes).sum()
    }

    /// Every table and stream by name, with its bytes and whether it should stay flat
    /// (purged after a retention, or a work queue).
    fn stores(&self) -> BTreeMap<String, (i64, bool)> {
        let tables = self
            .tables
            .iter()
            .map(|t| (format!("table {}", t.table), (t.total(), t.is_purged())));
        let streams = self
            .streams
            .iter()
            .map(|s| (format!("stream {}", s.name), (s.bytes as i64, s.work_queue)));
        tables.chain(streams).collect()
    }
}

/// The figures of one minute of the load.
#[derive(Debug, Clone, Default)]
struct Minute {
    started: usize,
    ended: usize,
    failed: usize,
    /// Workflows ended by the end of this minute, since the load began.
    ended_total: usize,
    steps: u64,
    chain_latencies: Vec<Duration>,
    all_latencies: Vec<Duration>,
    in_flight: usize,
    sample: Sample,
}

/// The soak's verdict on one thing it watched.
#[derive(Debug)]
struct Check {
    name: String,
    passed: bool,
    detail: String,
}

struct Load {
    api: ApiClient,
    waiters: Waiters,
    run_id: String,
    timeout: Duration,
}

/// Starts the mix's workflows one after another, each in a task of its own that sends
/// its outcome back; counts what is in flight.
struct Driver {
    load: Arc<Load>,
    kinds: Arc<Vec<Kind>>,
    order: Vec<usize>,
    next: usize,
    in_flight: usize,
    outcomes_tx: mpsc::UnboundedSender<Outcome>,
    outcomes: mpsc::UnboundedReceiver<Outcome>,
}

impl Driver {
    fn new(load: Arc<Load>, kinds: Vec<Kind>) -> Self {
        let order = schedule(&kinds);
        let (outcomes_tx, outcomes) = mpsc::unbounded_channel();
        Self {
            load,
            kinds: Arc::new(kinds),
            order,
            next: 0,
            in_flight: 0,
            outcomes_tx,
            outcomes,
        }
    }

    /// The mix's average activities per start.
    fn activities_per_start(&self) -> f64 {
        let total: u32 = self.order.iter().map(|&k| self.kinds[k].activities).sum();
        f64::from(total) / self.order.len() as f64
    }

    fn start_next(&mut self) {
        let kind = self.order[self.next % self.order.len()];
        let n = self.next;
        self.next += 1;
        self.in_flight += 1;
        let (load, kinds, outcomes_tx) = (
            self.load.clone(),
            self.kinds.clone(),
            self.outcomes_tx.clone(),
        );
        tokio::spawn(async move {
            let result = run_one(&load, &kinds[kind], n).await;
            let _ = outcomes_tx.send(Outcome { kind, result });
        });
    }

    /// The next outcome (its kind, and its latency or failure), counted out of the
    /// workflows in flight.
    async fn next_outcome(&mut self) -> Option<(Kind, Result<Duration, Failure>)> {
        let outcome = self.outcomes.recv().await?;
        self.in_flight -= 1;
        Some((self.kinds[outcome.kind].clone(), outcome.result))
    }

    /// The steps/s the server keeps up with `in_flight` of the mix in flight, counted
    /// after the first quarter of `duration`, and how many failed; then waits for what
    /// is in flight.
    async fn measure_capacity(&mut self, in_flight: usize, duration: Duration) -> (f64, usize) {
        let begin = tokio::time::Instant::now();
        let (count_from, end) = (begin + duration / 4, begin + duration);
        let mut steps = 0u64;
        let mut failed = 0usize;
        while self.in_flight < in_flight {
            self.start_next();
        }
        while self.in_flight > 0 {
            let Some((kind, result)) = self.next_outcome().await else {
                break;
            };
            let now = tokio::time::Instant::now();
            match result {
                Ok(_) if now >= count_from && now < end => steps += u64::from(kind.activities),
                Ok(_) => {}
                Err(failure) => {
                    failed += 1;
                    eprintln!(
                        "soak: measuring: {} {}: {}",
                        kind.label,
                        failure.kind.label(),
                        failure.message
                    );
                }
            }
            if now < end {
                self.start_next();
            }
        }
        (steps as f64 / (end - count_from).as_secs_f64(), failed)
    }
}

pub async fn run(
    nats_config: &NatsConfig,
    prefix: &str,
    database_url: Option<&str>,
    args: &SoakArgs,
) -> anyhow::Result<bool> {
    anyhow::ensure!(
        args.load > 0.0 && args.load.is_finite(),
        "--load must be a positive fraction, e.g. 0.7"
    );
    anyhow::ensure!(args.minutes > 0, "--minutes must be at least 1");
    let database_url = database_url
        .context("the soak reads the tables' sizes: give --database-url or HCPFLOW_DATABASE_URL")?;
    let store = EventStore::connect(database_url, 2)
        .await
        .context("connecting to Postgres for the tables' sizes")?;
    let durability = store.durability().await?;
    let api = ApiClient {
        client: hcpflow_protocol::connect(nats_config, "hcpflow-soak").await?,
        subjects: Subjects::new(prefix)?,
        tenant: hcpflow_engine::TenantId::default_tenant(),
    };
    let waiters: Waiters = Default::default();
    let router = bench::route_terminal_events(&api, waiters.clone()).await?;
    let load = Arc::new(Load {
        api,
        waiters,
        run_id: format!("soak-{}", chrono::Utc::now().format("%Y%m%d%H%M%S%3f")),
        timeout: Duration::from_secs(args.timeout_secs),
    });
    let kinds = mix();
    let mix_line = kinds
        .iter()
        .map(|k| format!("{} {}", k.per_cycle, k.label))
        .collect::<Vec<_>>()
        .join(", ");
    let mut driver = Driver::new(load.clone(), kinds);
    let mut measure_failed = 0;
    let steps_per_sec = match args.steps_per_sec {
        Some(rate) => rate,
        None => {
            let (capacity, failed) = driver
                .measure_capacity(
                    args.measure_in_flight.max(1),
                    Duration::from_secs(args.measure_secs.max(4)),
                )
                .await;
            println!(
                "soak: capacity {capacity:.0} steps/s (the mix below, {} in flight; {failed} failed)",
                args.measure_in_flight
            );
            measure_failed = failed;
            capacity * args.load
        }
    };
    anyhow::ensure!(
        steps_per_sec > 0.0 && steps_per_sec.is_finite(),
        "no capacity to run at ({steps_per_sec} steps/s)"
    );
    let starts_per_sec = steps_per_sec / driver.activities_per_start();
    println!(
        "soak: {} min at {steps_per_sec:.0} steps/s ({starts_per_sec:.1} starts/s), postgres {}; per {MIX_CYCLE} starts: {mix_line}",
        args.minutes,
        if durability.is_durable() { "durable" } else { "NOT DURABLE" },
    );

    let baseline = sample(&store, &load, args).await?;
    print_header();
    let mut starts = tokio::time::interval(Duration::from_secs_f64(1.0 / starts_per_sec));
    starts.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut minute_ticks = tokio::time::interval_at(
        tokio::time::Instant::now() + Duration::from_secs(60),
        Duration::from_secs(60),
    );
    let end = tokio::time::Instant::now() + Duration::from_secs(60 * args.minutes);
    let mut minutes: Vec<Minute> = Vec::new();
    let mut current = Minute::default();
    let mut ended_total = 0usize;
    let mut held_back = 0usize;
    let mut last_tick = tokio::time::Instant::now();
    loop {
        tokio::select! {
            _ = starts.tick(), if tokio::time::Instant::now() < end => {
                current.started += 1;
                if driver.in_flight >= args.max_in_flight {
                    held_back += 1;
                    current.failed += 1;
                } else {
                    driver.start_next();
                }
            }
            Some((kind, result)) = driver.next_outcome() => {
                ended_total += 1;
                current.ended += 1;
                match result {
                    Ok(latency) => {
                        current.steps += u64::from(kind.activities);
                        current.all_latencies.push(latency);
                        if kind.label == CHAIN {
                            current.chain_latencies.push(latency);
                        }
                    }
                    Err(failure) => {
                        current.failed += 1;
                        eprintln!("soak: {} {}: {}", kind.label, failure.kind.label(), failure.message);
                    }
                }
                if driver.in_flight == 0 && tokio::time::Instant::now() >= end {
                    break;
                }
            }
            _ = minute_ticks.tick() => {
                current.in_flight = driver.in_flight;
                current.ended_total = ended_total;
                current.sample = sample(&store, &load, args).await?;
                let previous = minutes.last().map_or(&baseline, |m| &m.sample);
                print_minute(minutes.len() + 1, &current, previous, last_tick.elapsed());
                last_tick = tokio::time::Instant::now();
                minutes.push(std::mem::take(&mut current));
                if driver.in_flight == 0 && tokio::time::Instant::now() >= end {
                    break;
                }
            }
        }
    }
    router.abort();
    let drained = Minute {
        in_flight: driver.in_flight,
        ended_total,
        sample: sample(&store, &load, args).await?,
        ..current
    };
    println!(
        "  (the load stopped after {} min; the rest drained)",
        args.minutes
    );
    let previous = minutes.last().map_or(&baseline, |m| &m.sample);
    print_minute(minutes.len() + 1, &drained, previous, last_tick.elapsed());
    let unfinished = store.count_unfinished_with_prefix(&load.run_id).await?;

    let load_minutes = &minutes[..minutes.len().min(args.minutes as usize)];
    print_stores(&baseline, load_minutes);
    let failed: usize = measure_failed
        + minutes
            .iter()
            .chain([&drained])
            .map(|m| m.failed)
            .sum::<usize>();
    let mut checks = vec![Check {
        name: "nothing failed".to_owned(),
        passed: failed == 0 && unfinished == 0,
        detail: format!(
            "{failed} failed ({held_back} held back with {} in flight), {unfinished} still unfinished in the database",
            args.max_in_flight
        ),
    }];
    checks.extend(flatness_checks(load_minutes));
    println!("soak: verdict");
    for check in &checks {
        println!(
            "  {} {:<34} {}",
            if check.passed { "ok  " } else { "FAIL" },
            check.name,
            check.detail
        );
    }
    Ok(checks.iter().all(|c| c.passed))
}

/// Starts one workflow of `kind`, signals it if the kind says so, and waits for its
/// terminal event.
async fn run_one(load: &Load, kind: &Kind, n: usize) -> Result<Duration, Failure> {
    let id = format!("{}-{n}", load.run_id);
    let Ok(workflow_id) = WorkflowId::new(id.clone()) else {
        return Err(Failure::new(
            FailureKind::StartNotSent,
            "the soak made an invalid workflow id",
        ));
    };
    let (sender, receiver) = oneshot::channel();
    if let Ok(mut waiters) = load.waiters.lock() {
        waiters.insert(id.clone(), sender);
    }
    let begin = Instant::now();
    let request = StartRequest {
        workflow_type: kind.workflow_type.to_owned(),
        workflow_id: Some(workflow_id.clone()),
        input: kind.input.clone(),
        parent: None,
    };
    if let Err(failure) = bench::start(&load.api, &request).await {
        if let Ok(mut waiters) = load.waiters.lock() {
            waiters.remove(&id);
        }
        return Err(failure);
    }
    if kind.signal {
        let delay = Duration::from_millis(rand::thread_rng().gen_range(0..4000));
        tokio::time::sleep(delay).await;
        signal(&load.api, &workflow_id).await?;
    }
    let remaining = load.timeout.saturating_sub(begin.elapsed());
    match tokio::time::timeout(remaining, receiver).await {
        Ok(Ok(ended)) if ended == kind.expected => Ok(begin.elapsed()),
        Ok(Ok(ended)) => Err(Failure::new(
            FailureKind::EndedOtherwise,
            format!("{id} ended with {ended}"),
        )),
        _ => {
            if let Ok(mut waiters) = load.waiters.lock() {
                waiters.remove(&id);
            }
            Err(Failure::new(
                FailureKind::DidNotFinish,
                format!("{id} did not finish in {:?}", load.timeout),
            ))
        }
    }
}

/// Sends `go`; a signal left unanswered is sent again (a second `go` is never waited
/// for: it stays in the history unread).
async fn signal(api: &ApiClient, workflow_id: &WorkflowId) -> Result<(), Failure> {
    let request = SignalRequest {
        workflow_id: workflow_id.clone(),
        signal: "go".to_owned(),
        payload: json!({"from": "soak"}),
    };
    let mut attempt = 1;
    loop {
        match api.request(&request).await {
            Ok(_) => return Ok(()),
            Err(CallError::TimedOut { .. }) if attempt < 3 => attempt += 1,
            Err(error) => {
                return Err(Failure::new(
                    FailureKind::EndedOtherwise,
                    format!("{workflow_id}: signal: {error}"),
                ))
            }
        }
    }
}

async fn sample(store: &EventStore, load: &Load, args: &SoakArgs) -> anyhow::Result<Sample> {
    let api = &load.api;
    let servers = &args.server_metrics;
    let (rss_bytes, engine) = if servers.is_empty() {
        (None, None)
    } else {
        let metric = |name| bench::servers_metric_sum(servers, name);
        let rss = bench::servers_gauge_sum(servers, "hcpflow_process_resident_memory_bytes");
        (
            Some(rss.await?),
            Some(EngineCounters {
                conflicts: metric("hcpflow_append_conflicts_total").await?,
                step_seconds: metric("hcpflow_workflow_task_seconds_sum").await?,
                steps: metric("hcpflow_workflow_task_seconds_count").await?,
            }),
        )
    };
    let js = async_nats::jetstream::new(api.client.clone());
    let mut streams = Vec::new();
    for role in StreamRole::ALL {
        let name = api.subjects.stream(role);
        let stream = js
            .get_stream(&name)
            .await
            .with_context(|| format!("reading stream {name}"))?;
        let info = stream.cached_info();
        streams.push(StreamSize {
            name,
            bytes: info.state.bytes,
            messages: info.state.messages,
            work_queue: info.config.retention
                == async_nats::jetstream::stream::RetentionPolicy::WorkQueue,
        });
    }
    let (unsigned_ended, signed_ended) = store.count_signing_backlog(&load.run_id).await?;
    Ok(Sample {
        rss_bytes,
        engine,
        unsigned_ended,
        signed_ended,
        tables: store.table_sizes().await?,
        streams,
    })
}

fn mib(bytes: f64) -> String {
    format!("{:.1}", bytes / f64::from(1 << 20))
}

fn millis(duration: Duration) -> String {
    format!("{:.1}", duration.as_secs_f64() * 1000.0)
}

fn percentile(latencies: &[Duration], p: f64) -> Option<Duration> {
    let mut sorted = latencies.to_vec();
    sorted.sort();
    bench::percentile_of_sorted(&sorted, p)
}

fn print_header() {
    println!(
        "  {:>4} {:>8} {:>8} {:>6} {:>9} {:>8} {:>10} {:>10} {:>10} {:>8} {:>9} {:>11} {:>11} {:>8}",
        "min",
        "started",
        "ended",
        "failed",
        "in flight",
        "steps/s",
        "chain p50",
        "chain p99",
        "all p99",
        "RSS MiB",
        "pg MiB",
        "streams MiB",
        "conflicts/s",
        "step ms"
    );
}

/// One line of the report; the rates are over `elapsed` since `previous`.
fn print_minute(number: usize, minute: &Minute, previous: &Sample, elapsed: Duration) {
    let ms = |d: Option<Duration>| d.map_or("-".to_owned(), millis);
    let rates = match (minute.sample.engine, previous.engine) {
        (Some(now), Some(before)) => {
            let (conflicts, step_ms) = now.rates_since(&before, elapsed.as_secs_f64());
            (format!("{conflicts:.1}"), format!("{step_ms:.2}"))
        }
        _ => ("-".to_owned(), "-".to_owned()),
    };
    println!(
        "  {:>4} {:>8} {:>8} {:>6} {:>9} {:>8.1} {:>10} {:>10} {:>10} {:>8} {:>9} {:>11} {:>11} {:>8}",
        number,
        minute.started,
        minute.ended,
        minute.failed,
        minute.in_flight,
        minute.steps as f64 / 60.0,
        ms(percentile(&minute.chain_latencies, 0.50)),
        ms(percentile(&minute.chain_latencies, 0.99)),
        ms(percentile(&minute.all_latencies, 0.99)),
        minute
            .sample
            .rss_bytes
            .map_or("-".to_owned(), |b| mib(b as f64)),
        mib(minute.sample.table_bytes() as f64),
        mib(minute.sample.stream_bytes() as f64),
        rates.0,
        rates.1,
    );
}

/// Every table and stream at the start, half way and at the end of the load.
fn print_stores(baseline: &Sample, minutes: &[Minute]) {
    let mid = minutes
        .len()
        .checked_div(2)
        .and_then(|half| half.checked_sub(1));
    let (Some(mid), Some(last)) = (mid.and_then(|m| minutes.get(m)), minutes.last()) else {
        return;
    };
    println!(
        "soak: storage in MiB (before / after {} min / after {} min)",
        minutes.len() / 2,
        minutes.len()
    );
    let before = baseline.stores();
    let (half, end) = (mid.sample.stores(), last.sample.stores());
    for (name, (bytes, flat)) in &end {
        let at = |stores: &BTreeMap<String, (i64, bool)>| {
            stores.get(name).map_or(0.0, |(b, _)| *b as f64)
        };
        println!(
            "  {:<32} {:>9} {:>9} {:>9}{}",
            name,
            mib(at(&before)),
            mib(at(&half)),
            mib(*bytes as f64),
            if *flat {
                "  (purged or consumed: stays flat)"
            } else {
                ""
            }
        );
    }
    for stream in &last.sample.streams {
        println!(
            "  stream {} holds {} messages",
            stream.name, stream.messages
        );
    }
    println!(
        "  ended workflows not signed yet: {} / {} / {}",
        baseline.unsigned_ended, mid.sample.unsigned_ended, last.sample.unsigned_ended
    );
}

/// Whether memory, latency and storage per workflow stayed flat over the last half of
/// the load. A soak of fewer than four minutes is too short to judge.
fn flatness_checks(minutes: &[Minute]) -> Vec<Check> {
    if minutes.len() < 4 {
        return vec![Check {
            name: "flat over the last half".to_owned(),
            passed: false,
            detail: format!(
                "{} minutes are too few to judge: run at least 4",
                minutes.len()
            ),
        }];
    }
    let n = minutes.len();
    let mid = &minutes[n / 2 - 1];
    let last = &minutes[n - 1];
    let mut checks = Vec::new();

    // Memory: the measure, growth of the resident set over the last half.
    if let (Some(at_mid), Some(at_end)) = (mid.sample.rss_bytes, last.sample.rss_bytes) {
        let growth = at_end as f64 / at_mid.max(1) as f64 - 1.0;
        checks.push(Check {
            name: "server RSS over the last half".to_owned(),
            passed: growth < 0.05,
            detail: format!(
                "{} → {} MiB ({:+.1}%; at most +5%)",
                mib(at_mid as f64),
                mib(at_end as f64),
                growth * 100.0
            ),
        });
    }

    // Latency: the p99 of the last quarter's minutes (their median, which one noisy
    // minute does not move) against the quarter before the half way mark: its growth
    // over the last half, the first quarter (warming up) left out.
    let quarter = (n / 4).max(1);
    let median_p99 = |range: &[Minute], all: bool| {
        let mut p99s: Vec<Duration> = range
            .iter()
            .filter_map(|m| {
                percentile(
                    if all {
                        &m.all_latencies
                    } else {
                        &m.chain_latencies
                    },
                    0.99,
                )
            })
            .collect();
        p99s.sort();
        p99s.get(p99s.len() / 2).copied()
    };
    for (name, all) in [("chain p99", false), ("all p99", true)] {
        let before = median_p99(&minutes[n / 2 - quarter..n / 2], all);
        let after = median_p99(&minutes[n - quarter..], all);
        if let (Some(before), Some(after)) = (before, after) {
            let ratio = after.as_secs_f64() / before.as_secs_f64().max(1e-6);
            checks.push(Check {
                name: format!("{name}, last quarter vs the second"),
                passed: ratio <= 1.25,
                detail: format!(
                    "{} → {} ms ({ratio:.2}×; at most 1.25×)",
                    millis(before),
                    millis(after)
                ),
            });
        }
    }

    // Signing: the checkpointer's backlog must not grow with the ends (unless nothing
    // signs: a server without an audit signing key runs no checkpointer).
    let (backlog_mid, backlog_end) = (mid.sample.unsigned_ended, last.sample.unsigned_ended);
    if last.sample.signed_ended > 0 {
        checks.push(Check {
            name: "audit signing keeps up".to_owned(),
            passed: backlog_end <= backlog_mid + (backlog_mid / 10).max(1000),
            detail: format!(
                "{backlog_mid} → {backlog_end} ended workflows not signed yet over the last half (at most +10% or +1,000)"
            ),
        });
    }

    // Storage: what is purged or consumed must stop growing; what is kept must not cost
    // more per workflow in the last half than in the first.
    let first = &minutes[0];
    let (at_first, at_mid, at_end) = (
        first.sample.stores(),
        mid.sample.stores(),
        last.sample.stores(),
    );
    let ended_first_half = mid.ended_total.saturating_sub(first.ended_total).max(1) as f64;
    let ended_last_half = last.ended_total.saturating_sub(mid.ended_total).max(1) as f64;
    for (name, (end_bytes, flat)) in &at_end {
        let mid_bytes = at_mid.get(name).map_or(0, |(b, _)| *b);
        let first_bytes = at_first.get(name).map_or(0, |(b, _)| *b);
        if *flat {
            let allowed = (mid_bytes as f64 * 1.10).max(mid_bytes as f64 + f64::from(1 << 20));
            checks.push(Check {
                name: format!("{name} stays flat"),
                passed: (*end_bytes as f64) <= allowed,
                detail: format!(
                    "{} → {} MiB over the last half (at most +10% or +1 MiB)",
                    mib(mid_bytes as f64),
                    mib(*end_bytes as f64)
                ),
            });
        } else {
            let per_before = (mid_bytes - first_bytes) as f64 / ended_first_half;
            let per_after = (end_bytes - mid_bytes) as f64 / ended_last_half;
            checks.push(Check {
                name: format!("{name} per workflow"),
                passed: per_after <= per_before.max(0.0) * 1.25 + 256.0,
                detail: format!(
                    "{per_before:.0} → {per_after:.0} bytes per ended workflow (at most 1.25× + 256)"
                ),
            });
        }
    }
    checks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schedule_interleaves_the_mix_in_its_proportions() {
        let kinds = mix();
        let order = schedule(&kinds);
        assert_eq!(order.len(), MIX_CYCLE);
        for (index, kind) in kinds.iter().enumerate() {
            assert_eq!(
                order.iter().filter(|&&k| k == index).count(),
                kind.per_cycle
            );
        }
        // No kind other than the chain comes twice in a row.
        for pair in order.windows(2) {
            assert!(
                pair[0] != pair[1] || kinds[pair[0]].label == CHAIN,
                "{order:?}"
            );
        }
    }

    fn minute(ended_total: usize, rss: u64, chain_ms: u64, outbox: i64, events: i64) -> Minute {
        let table = |name: &str, bytes| TableSize {
            table: name.to_owned(),
            heap_bytes: bytes,
            index_bytes: 0,
        };
        Minute {
            ended_total,
            chain_latencies: vec![Duration::from_millis(chain_ms); 10],
            all_latencies: vec![Duration::from_millis(chain_ms); 10],
            sample: Sample {
                rss_bytes: Some(rss),
                engine: None,
                unsigned_ended: 500,
                signed_ended: 1000,
                tables: vec![table("outbox", outbox), table("events", events)],
                streams: Vec::new(),
            },
            ..Minute::default()
        }
    }

    fn failed(checks: &[Check]) -> Vec<&str> {
        checks
            .iter()
            .filter(|c| !c.passed)
            .map(|c| c.name.as_str())
            .collect()
    }

    #[test]
    fn a_steady_load_is_flat() {
        let minutes: Vec<Minute> = (1..=8)
            .map(|m| minute(m * 1000, 300 << 20, 20, 8 << 20, m as i64 * (10 << 20)))
            .collect();
        assert_eq!(failed(&flatness_checks(&minutes)), Vec::<&str>::new());
    }

    #[test]
    fn growth_over_the_last_half_fails_the_soak() {
        let minutes: Vec<Minute> = (1..=8u64)
            .map(|m| {
                let mut minute = minute(
                    m as usize * 1000,
                    (300 + 10 * m) << 20,
                    20 * m,
                    m as i64 * (4 << 20),
                    (m * m) as i64 * (10 << 20),
                );
                minute.sample.unsigned_ended = m as i64 * 2000;
                minute
            })
            .collect();
        assert_eq!(
            failed(&flatness_checks(&minutes)),
            vec![
                "server RSS over the last half",
                "chain p99, last quarter vs the second",
                "all p99, last quarter vs the second",
                "audit signing keeps up",
                "table events per workflow",
                "table outbox stays flat",
            ]
        );
    }

    #[test]
    fn the_engine_rates_are_per_second_and_per_step() {
        let before = EngineCounters {
            conflicts: 10.0,
            step_seconds: 1.0,
            steps: 100.0,
        };
        let now = EngineCounters {
            conflicts: 70.0,
            step_seconds: 3.0,
            steps: 1100.0,
        };
        assert_eq!(now.rates_since(&before, 60.0), (1.0, 2.0));
        assert_eq!(now.rates_since(&now, 60.0), (0.0, 0.0));
    }

    #[test]
    fn a_short_soak_is_not_judged_flat() {
        let minutes: Vec<Minute> = (1..=3).map(|m| minute(m, 1, 1, 1, 1)).collect();
        assert!(!flatness_checks(&minutes)[0].passed);
    }
}
