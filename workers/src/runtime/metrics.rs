//! Prometheus metrics of a worker process: the counters, the outbox-lag gauge and
//! the task latency histograms the roles update through [`Metrics`], their
//! registration in a `prometheus-client` [`Registry`] under the `hcpflow_` names
//! scrapers rely on, rendered as the OpenMetrics text exposition (served by
//! `ops_http.rs`).

use std::sync::atomic::AtomicU64;
use std::sync::OnceLock;
use std::time::Duration;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter as PromCounter;
use prometheus_client::metrics::gauge::Gauge as PromGauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

/// The `Content-Type` of what [`Metrics::render`] produces: OpenMetrics text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Upper bounds in seconds of the latency histogram buckets (`+Inf` is implied):
/// from a millisecond (a workflow task on a warm cache) to fifteen minutes (a slow
/// cloud activity attempt).
const LATENCY_BUCKETS_SECONDS: [f64; 17] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
    300.0, 900.0,
];

/// This process's resident set sizes from Linux's `/proc/self/status`: the current
/// (`VmRSS`) and the peak (`VmHWM`), if the system tells.
fn resident_bytes() -> (Option<u64>, Option<u64>) {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return (None, None);
    };
    let field = |name: &str| {
        let line = status.lines().find(|line| line.starts_with(name))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib * 1024)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// A count that only goes up; exposed as `<name>_total`.
#[derive(Debug, Default)]
pub struct Counter(PromCounter<u64, AtomicU64>);

impl Counter {
    pub fn inc(&self) {
        self.0.inc();
    }

    pub fn add(&self, n: u64) {
        self.0.inc_by(n);
    }

    pub fn get(&self) -> u64 {
        self.0.get()
    }
}

/// A value that goes up and down.
#[derive(Debug, Default)]
pub struct Gauge(PromGauge<u64, AtomicU64>);

impl Gauge {
    pub fn set(&self, value: u64) {
        self.0.set(value);
    }

    pub fn get(&self) -> u64 {
        self.0.get()
    }
}

/// Durations, as a histogram in seconds (`_bucket`, `_sum`, `_count`).
#[derive(Debug)]
pub struct Timing(Histogram);

impl Default for Timing {
    fn default() -> Self {
        Self(Histogram::new(LATENCY_BUCKETS_SECONDS))
    }
}

impl Timing {
    pub fn record(&self, elapsed: Duration) {
        self.0.observe(elapsed.as_secs_f64());
    }
}

#[derive(Debug, Default)]
pub struct Metrics {
    pub workflow_tasks: Counter,
    pub activity_tasks: Counter,
    pub eager_tasks: Counter,
    /// Local tasks that waited their longest in the backlog and went to NATS.
    pub backlog_handed_to_nats: Counter,
    pub redeliveries: Counter,
    pub conflicts: Counter,
    pub published: Counter,
    pub relayed: Counter,
    pub blocked: Counter,
    pub duplicates_dropped: Counter,
    pub api_requests: Counter,
    pub api_errors: Counter,
    /// Requests answered `overloaded` (among the errors).
    pub api_overloaded: Counter,
    pub dead_lettered: Counter,
    pub swept: Counter,
    pub timers_fired: Counter,
    pub checkpoint_scans: Counter,
    /// Heads signed after reading their whole chain back and verifying it.
    pub checkpoint_chains_read: Counter,
    /// Heads signed as this process wrote them, every event of the chain appended here.
    pub checkpoint_heads_witnessed: Counter,
    /// Heads left to a later scan: a step of their workflow was in flight here, and the
    /// head was not one it had recorded.
    pub checkpoint_heads_deferred: Counter,
    /// Age in milliseconds of the oldest row the relay last had to publish; 0 when it
    /// found none.
    pub outbox_lag_ms: Gauge,
    /// The memory this process holds resident (VmRSS), read at each render.
    pub rss_bytes: Gauge,
    /// The most memory this process has held resident (VmHWM), read at each render.
    pub peak_rss_bytes: Gauge,
    pub workflow_task_time: Timing,
    pub activity_time: Timing,
    /// Handles to the metrics above (they share their values), registered under
    /// their exposed names on the first [`Metrics::render`].
    registry: OnceLock<Registry>,
}

impl Metrics {
    /// The OpenMetrics text exposition of every metric, ending with `# EOF`.
    pub fn render(&self) -> String {
        let (current, peak) = resident_bytes();
        if let Some(bytes) = current {
            self.rss_bytes.set(bytes);
        }
        if let Some(bytes) = peak {
            self.peak_rss_bytes.set(bytes);
        }
        let registry = self.registry.get_or_init(|| self.register());
        let mut out = String::new();
        encode(&mut out, registry).expect("encoding metrics into a String cannot fail");
        out
    }

    /// The counters with their names (without the `hcpflow_` prefix and the `_total`
    /// suffix, which the encoder adds) and help texts.
    fn counters(&self) -> [(&'static str, &'static str, &Counter); 20] {
        [
            ("workflow_tasks", "workflow tasks run", &self.workflow_tasks),
            (
                "activity_tasks",
                "activity attempts run",
                &self.activity_tasks,
            ),
            (
                "eager_activity_tasks",
                "activity tasks run where they were scheduled, without a trip through NATS",
                &self.eager_tasks,
            ),
            (
                "backlog_handed_to_nats",
                "local activity tasks that found no slot within the backlog's wait and went to NATS",
                &self.backlog_handed_to_nats,
            ),
            (
                "redeliveries",
                "tasks NATS delivered more than once",
                &self.redeliveries,
            ),
            (
                "append_conflicts",
                "appends that lost a race and were retried",
                &self.conflicts,
            ),
            (
                "outbox_published",
                "outbox rows and events published right after commit",
                &self.published,
            ),
            (
                "outbox_relayed",
                "outbox rows and events published by the relay (what a crash left behind)",
                &self.relayed,
            ),
            (
                "blocked",
                "workflows blocked by nondeterminism or a panic",
                &self.blocked,
            ),
            (
                "duplicate_outcomes_dropped",
                "activity outcomes recorded already",
                &self.duplicates_dropped,
            ),
            ("api_requests", "API requests", &self.api_requests),
            (
                "api_errors",
                "API requests answered with an error",
                &self.api_errors,
            ),
            (
                "api_overloaded",
                "API requests answered overloaded, unread (among the errors)",
                &self.api_overloaded,
            ),
            (
                "dead_lettered",
                "submissions rejected to the dead-letter stream",
                &self.dead_lettered,
            ),
            ("swept", "workflows the sweeper re-enqueued", &self.swept),
            (
                "timers_fired",
                "timers and retry backoffs fired",
                &self.timers_fired,
            ),
            (
                "checkpoint_scans",
                "scans of the checkpointer for heads to sign",
                &self.checkpoint_scans,
            ),
            (
                "checkpoint_chains_read",
                "heads the checkpointer read back and verified before signing",
                &self.checkpoint_chains_read,
            ),
            (
                "checkpoint_heads_witnessed",
                "heads the checkpointer signed as this process wrote their whole chain",
                &self.checkpoint_heads_witnessed,
            ),
            (
                "checkpoint_heads_deferred",
                "heads left to a later scan while a step of their workflow was in flight here",
                &self.checkpoint_heads_deferred,
            ),
        ]
    }

    /// A registry holding handles to every metric, under the `hcpflow_` prefix.
    fn register(&self) -> Registry {
        let mut registry = Registry::with_prefix("hcpflow");
        for (name, help, counter) in self.counters() {
            registry.register(name, help, counter.0.clone());
        }
        registry.register_with_unit(
            "outbox_lag",
            "age of the oldest outbox row or unpublished event the relay last found",
            Unit::Other("milliseconds".to_owned()),
            self.outbox_lag_ms.0.clone(),
        );
        registry.register_with_unit(
            "process_resident_memory",
            "the memory this process holds resident",
            Unit::Bytes,
            self.rss_bytes.0.clone(),
        );
        registry.register_with_unit(
            "process_peak_resident_memory",
            "the most memory this process has held resident",
            Unit::Bytes,
            self.peak_rss_bytes.0.clone(),
        );
        registry.register_with_unit(
            "workflow_task",
            "time to run a workflow task that appended events",
            Unit::Seconds,
            self.workflow_task_time.0.clone(),
        );
        registry.register_with_unit(
            "activity",
            "time to run an activity attempt",
            Unit::Seconds,
            self.activity_time.0.clone(),
        );
        registry
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every sample name exposed (those from before the move to `prometheus-client`
    /// among them): scrapers and dashboards depend on them.
    const SAMPLE_NAMES: [&str; 24] = [
        "hcpflow_workflow_tasks_total",
        "hcpflow_activity_tasks_total",
        "hcpflow_eager_activity_tasks_total",
        "hcpflow_redeliveries_total",
        "hcpflow_append_conflicts_total",
        "hcpflow_outbox_published_total",
        "hcpflow_outbox_relayed_total",
        "hcpflow_blocked_total",
        "hcpflow_duplicate_outcomes_dropped_total",
        "hcpflow_api_requests_total",
        "hcpflow_api_errors_total",
        "hcpflow_api_overloaded_total",
        "hcpflow_dead_lettered_total",
        "hcpflow_swept_total",
        "hcpflow_timers_fired_total",
        "hcpflow_checkpoint_scans_total",
        "hcpflow_checkpoint_chains_read_total",
        "hcpflow_checkpoint_heads_witnessed_total",
        "hcpflow_checkpoint_heads_deferred_total",
        "hcpflow_outbox_lag_milliseconds",
        "hcpflow_workflow_task_seconds_sum",
        "hcpflow_workflow_task_seconds_count",
        "hcpflow_activity_seconds_sum",
        "hcpflow_activity_seconds_count",
    ];

    /// The value of the unlabelled sample `name`, parsed like the integration test
    /// and a scraper read it.
    fn sample(text: &str, name: &str) -> Option<f64> {
        text.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
            .and_then(|value| value.trim().parse().ok())
    }

    #[test]
    fn every_existing_sample_name_is_exposed() {
        let text = Metrics::default().render();
        for name in SAMPLE_NAMES {
            assert_eq!(sample(&text, name), Some(0.0), "{name} in\n{text}");
        }
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[test]
    fn types_units_and_help_are_declared() {
        let text = Metrics::default().render();
        for line in [
            "# TYPE hcpflow_activity_tasks counter",
            "# HELP hcpflow_activity_tasks activity attempts run.",
            "# TYPE hcpflow_outbox_lag_milliseconds gauge",
            "# UNIT hcpflow_outbox_lag_milliseconds milliseconds",
            "# TYPE hcpflow_workflow_task_seconds histogram",
            "# UNIT hcpflow_workflow_task_seconds seconds",
            "# TYPE hcpflow_activity_seconds histogram",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
        }
        assert_eq!(text.matches("# TYPE ").count(), 25, "{text}");
    }

    #[test]
    fn the_resident_memory_is_the_processs() {
        let text = Metrics::default().render();
        let peak = sample(&text, "hcpflow_process_peak_resident_memory_bytes").unwrap();
        let current = sample(&text, "hcpflow_process_resident_memory_bytes").unwrap();
        assert!(current > 1_000_000.0, "{text}");
        assert!(peak >= current, "{text}");
    }

    #[test]
    fn updates_after_the_first_render_show_in_the_next() {
        let metrics = Metrics::default();
        metrics.activity_tasks.inc();
        let _ = metrics.render();
        metrics.activity_tasks.add(2);
        metrics.published.add(5);
        metrics.outbox_lag_ms.set(42);
        metrics.outbox_lag_ms.set(7);
        let text = metrics.render();
        assert_eq!(metrics.activity_tasks.get(), 3);
        assert_eq!(metrics.outbox_lag_ms.get(), 7);
        assert_eq!(sample(&text, "hcpflow_activity_tasks_total"), Some(3.0));
        assert_eq!(sample(&text, "hcpflow_outbox_published_total"), Some(5.0));
        assert_eq!(sample(&text, "hcpflow_outbox_lag_milliseconds"), Some(7.0));
        assert!(
            text.contains("\nhcpflow_activity_tasks_total 3\n"),
            "{text}"
        );
    }

    #[test]
    fn timings_are_histograms_in_seconds() {
        let metrics = Metrics::default();
        metrics.activity_time.record(Duration::from_millis(250));
        metrics.activity_time.record(Duration::from_secs(2));
        metrics
            .workflow_task_time
            .record(Duration::from_micros(700));
        let text = metrics.render();
        assert_eq!(sample(&text, "hcpflow_activity_seconds_count"), Some(2.0));
        assert_eq!(sample(&text, "hcpflow_activity_seconds_sum"), Some(2.25));
        assert_eq!(
            sample(&text, "hcpflow_workflow_task_seconds_count"),
            Some(1.0)
        );
        for (le, count) in [("0.25", 1.0), ("1.0", 1.0), ("2.5", 2.0), ("+Inf", 2.0)] {
            let name = format!("hcpflow_activity_seconds_bucket{{le=\"{le}\"}}");
            assert_eq!(sample(&text, &name), Some(count), "{name} in\n{text}");
        }
        let name = "hcpflow_workflow_task_seconds_bucket{le=\"0.001\"}";
        assert_eq!(sample(&text, name), Some(1.0), "{text}");
    }
}
