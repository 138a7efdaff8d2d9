//! What a user watching a workflow sees: history entries (as the history API and the
//! events stream carry them), decoded by the engine, turned into one line per step, with the AWS and
//! Kubernetes ids as they appear, retries and compensations. Pure: entries in, lines
//! out; [`crate::cli::follow`] feeds it and draws the spinner.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use hcpflow_engine::event::{ActivityFailed, ActivityScheduled};
use hcpflow_engine::{Event, Seq};
use hcpflow_protocol::HistoryEntry;
use serde_json::Value;

pub use hcpflow_audit::step_label;

/// How a workflow ended, as its terminal event says.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Completed {
        output: Value,
    },
    /// Failed and rolled back: nothing left.
    Compensated {
        cause: String,
    },
    /// Failed; `left` names what a compensation could not undo.
    Failed {
        error: String,
        left: Vec<String>,
    },
    Cancelled {
        reason: Option<String>,
    },
}

impl Outcome {
    pub fn status(&self) -> &'static str {
        match self {
            Outcome::Completed { .. } => "completed",
            Outcome::Compensated { .. } => "compensated",
            Outcome::Failed { .. } => "failed",
            Outcome::Cancelled { .. } => "cancelled",
        }
    }

    pub fn succeeded(&self) -> bool {
        matches!(self, Outcome::Completed { .. })
    }

    /// The outcome a terminal event records; `None` for any other event.
    fn of(event: &Event) -> Option<Outcome> {
        Some(match event {
            Event::WorkflowCompleted(done) => Outcome::Completed {
                output: done.output.clone(),
            },
            Event::WorkflowCompensated(undone) => Outcome::Compensated {
                cause: undone.cause.to_string(),
            },
            Event::WorkflowFailed(failed) => Outcome::Failed {
                error: failed.error.to_string(),
                left: failed
                    .left
                    .iter()
                    .map(|l| format!("{} ({})", step_label(&l.activity_type, &l.input), l.reason))
                    .collect(),
            },
            Event::WorkflowCancelled(cancelled) => Outcome::Cancelled {
                reason: cancelled.reason.clone(),
            },
            _ => return None,
        })
    }
}

#[derive(Debug, Clone)]
struct Step {
    label: String,
    scheduled_at: Option<DateTime<Utc>>,
    compensation: bool,
}

/// The state of one workflow's progress display.
#[derive(Debug, Default)]
pub struct Progress {
    started_at: Option<DateTime<Utc>>,
    last_at: Option<DateTime<Utc>>,
    /// Steps scheduled and not yet finished, by scheduled seq.
    running: BTreeMap<u64, Step>,
    /// Every step ever scheduled, by seq (labels for late events).
    steps: BTreeMap<u64, Step>,
    /// Resource ids recorded by a step's current attempt, by scheduled seq.
    ids: BTreeMap<u64, Vec<String>>,
    pub outcome: Option<Outcome>,
    pub workflow_type: Option<String>,
    pub created: usize,
    pub deleted: usize,
    /// Objects another owner made (the HyperShift operators), seen by a step.
    pub observed: usize,
    pub retries: usize,
    pub compensations: usize,
    pub events: u64,
}

impl Progress {
    pub fn new() -> Self {
        Self::default()
    }

    /// Applies one history entry; returns the lines it produces (none for most). An
    /// entry this code cannot decode (a newer server's event) is shown, not skipped.
    pub fn apply(&mut self, entry: &HistoryEntry) -> Vec<String> {
        self.events += 1;
        let at = entry.recorded_at();
        if at.is_some() {
            self.last_at = at;
        }
        let event = match entry.event() {
            Ok(event) => event,
            Err(error) => {
                let stamp = self.stamp(at);
                return vec![format!("{stamp}  ? event {}: {error}", entry.seq)];
            }
        };
        if let Event::WorkflowStarted(started) = &event {
            self.started_at = at;
            self.workflow_type = Some(started.workflow_type.clone());
        }
        let stamp = self.stamp(at);
        if let Some(outcome) = Outcome::of(&event) {
            return self.end(stamp, outcome);
        }
        match event {
            Event::WorkflowStarted(started) => {
                vec![format!("{stamp}  ▶ {} started", started.workflow_type)]
            }
            Event::ActivityScheduled(scheduled) => {
                self.scheduled(entry.seq.get(), &scheduled, at);
                Vec::new()
            }
            Event::ResourceCreated(made) => {
                self.created += 1;
                self.note_id(made.activity_seq, made.resource.id);
                Vec::new()
            }
            Event::ResourceDeleted(gone) => {
                self.deleted += 1;
                self.note_id(gone.activity_seq, gone.resource.id);
                Vec::new()
            }
            Event::ResourceObserved(seen) => {
                self.observed += 1;
                self.note_id(seen.activity_seq, seen.resource.id);
                Vec::new()
            }
            Event::ActivityCompleted(done) => self.completed(stamp, done.scheduled_seq.get(), at),
            Event::ActivityFailed(failed) => self.failed(stamp, &failed, at),
            Event::RollbackStarted(rollback) => vec![format!(
                "{stamp}  ⟲ rolling back {} step(s): {}",
                rollback.compensations, rollback.cause
            )],
            Event::CancelRequested(cancel) => vec![format!(
                "{stamp}  ■ cancel requested{}",
                cancel.reason.map(|r| format!(": {r}")).unwrap_or_default()
            )],
            Event::TimerStarted(timer) => vec![format!(
                "{stamp}  ⏲ waiting {:.1}s",
                timer.duration_ms as f64 / 1000.0
            )],
            Event::SignalReceived(signal) => vec![format!("{stamp}  ✉ signal {}", signal.name)],
            _ => Vec::new(),
        }
    }

    fn scheduled(&mut self, seq: u64, scheduled: &ActivityScheduled, at: Option<DateTime<Utc>>) {
        let step = Step {
            label: step_label(&scheduled.activity_type, &scheduled.input),
            scheduled_at: at,
            compensation: scheduled.compensation_of.is_some(),
        };
        if step.compensation {
            self.compensations += 1;
        }
        self.steps.insert(seq, step.clone());
        self.running.insert(seq, step);
    }

    /// Remembers a resource id the step's current attempt recorded.
    fn note_id(&mut self, step: Seq, id: String) {
        self.ids.entry(step.get()).or_default().push(id);
    }

    fn completed(
        &mut self,
        stamp: String,
        scheduled: u64,
        at: Option<DateTime<Utc>>,
    ) -> Vec<String> {
        let step = self.running.remove(&scheduled);
        let ids = self.ids.remove(&scheduled).unwrap_or_default();
        let Some(step) = step.or_else(|| self.steps.get(&scheduled).cloned()) else {
            return Vec::new();
        };
        let mark = if step.compensation { "↶" } else { "✓" };
        let took = match (step.scheduled_at, at) {
            (Some(from), Some(to)) => format!("  ({})", seconds(to - from)),
            _ => String::new(),
        };
        let ids = if ids.is_empty() {
            String::new()
        } else {
            format!("  {}", ids.join(" "))
        };
        vec![format!("{stamp}  {mark} {}{ids}{took}", step.label)]
    }

    fn failed(
        &mut self,
        stamp: String,
        failed: &ActivityFailed,
        at: Option<DateTime<Utc>>,
    ) -> Vec<String> {
        let scheduled = failed.scheduled_seq.get();
        self.ids.remove(&scheduled);
        let label = self
            .steps
            .get(&scheduled)
            .map(|s| s.label.clone())
            .unwrap_or_else(|| format!("step {scheduled}"));
        let (attempt, reason) = (failed.attempt, &failed.failure);
        match failed.retry_at {
            Some(retry_at) => {
                self.retries += 1;
                let wait = at.map(|at| {
                    let ms = i64::try_from(retry_at.as_millis()).unwrap_or(i64::MAX)
                        - at.timestamp_millis();
                    format!(" in {}", seconds(chrono::Duration::milliseconds(ms)))
                });
                vec![format!(
                    "{stamp}  ↻ {label}: attempt {attempt} failed ({reason}); retrying{}",
                    wait.unwrap_or_default()
                )]
            }
            None => {
                self.running.remove(&scheduled);
                vec![format!(
                    "{stamp}  ✗ {label}: attempt {attempt} failed for good ({reason})"
                )]
            }
        }
    }

    fn end(&mut self, stamp: String, outcome: Outcome) -> Vec<String> {
        self.running.clear();
        let mut lines = vec![match &outcome {
            Outcome::Completed { .. } => format!("{stamp}  ● completed"),
            Outcome::Compensated { cause } => {
                format!("{stamp}  ● failed and rolled back, nothing left: {cause}")
            }
            Outcome::Failed { error, .. } => format!("{stamp}  ● failed: {error}"),
            Outcome::Cancelled { reason } => format!(
                "{stamp}  ● cancelled{}",
                reason
                    .as_ref()
                    .map(|r| format!(": {r}"))
                    .unwrap_or_default()
            ),
        }];
        if let Outcome::Failed { left, .. } = &outcome {
            lines.extend(left.iter().map(|l| format!("           left behind: {l}")));
        }
        self.outcome = Some(outcome);
        lines
    }

    /// The labels of the steps now running, oldest first.
    pub fn running(&self) -> Vec<&str> {
        self.running.values().map(|s| s.label.as_str()).collect()
    }

    /// Time from the start to the last event.
    pub fn elapsed(&self) -> Option<chrono::Duration> {
        Some(self.last_at? - self.started_at?)
    }

    pub fn started_at(&self) -> Option<DateTime<Utc>> {
        self.started_at
    }

    fn stamp(&self, at: Option<DateTime<Utc>>) -> String {
        match (self.started_at, at) {
            (Some(start), Some(at)) => format!("{:>8}", format!("+{}", seconds(at - start))),
            _ => format!("{:>8}", "+0.0s"),
        }
    }
}

/// `1.2s`, or `2m05s` past a minute.
pub fn seconds(duration: chrono::Duration) -> String {
    let ms = duration.num_milliseconds().max(0);
    if ms < 60_000 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else {
        format!("{}m{:02}s", ms / 60_000, (ms % 60_000) / 1000)
    }
}

#[cfg(test)]
mod tests {
    use hcpflow_engine::event::{
        ActivityCompleted, ResourceCreated, ResourceRef, WorkflowCompensated, WorkflowStarted,
    };
    use hcpflow_engine::{ActivityFailure, ActivityOptions, Timestamp, WorkflowError};
    use serde_json::json;

    use super::*;

    const T0: u64 = 1_795_000_000_000;

    fn seq(n: u64) -> Seq {
        Seq::new(n).unwrap()
    }

    /// `event` as the server sends it, recorded `ms` after T0.
    fn entry(n: u64, ms: u64, event: impl Into<Event>) -> HistoryEntry {
        let (kind, data) = event.into().to_record();
        let at = DateTime::<Utc>::from_timestamp_millis((T0 + ms) as i64).unwrap();
        HistoryEntry {
            seq: seq(n),
            kind: kind.to_owned(),
            recorded_at: at.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string(),
            data,
            hash: String::new(),
            prev_hash: String::new(),
            workflow_id: None,
            body: None,
        }
    }

    fn started(workflow_type: &str) -> WorkflowStarted {
        WorkflowStarted {
            workflow_type: workflow_type.into(),
            input: json!({}),
            concurrency_key: None,
            parent: None,
        }
    }

    fn scheduled(activity_type: &str, input: Value, compensation_of: Option<Seq>) -> Event {
        ActivityScheduled {
            activity_type: activity_type.into(),
            input_digest: hcpflow_engine::event::digest(&input),
            input,
            options: ActivityOptions::default(),
            compensation_of,
        }
        .into()
    }

    fn completed(scheduled_seq: u64) -> ActivityCompleted {
        ActivityCompleted {
            scheduled_seq: seq(scheduled_seq),
            attempt: 1,
            result: json!({}),
        }
    }

    #[test]
    fn a_step_is_one_line_with_its_ids_and_duration() {
        let mut progress = Progress::new();
        let start = progress.apply(&entry(1, 0, started("create_hosted_cluster")));
        assert_eq!(start, vec!["   +0.0s  ▶ create_hosted_cluster started"]);
        let subnet =
            json!({"zone": "us-east-1a", "exposure": "private", "cidr_block": "10.0.0.0/20"});
        assert!(progress
            .apply(&entry(
                2,
                1_000,
                scheduled("aws.create_subnet", subnet, None)
            ))
            .is_empty());
        assert_eq!(
            progress.running(),
            vec!["aws.create_subnet private us-east-1a"]
        );
        progress.apply(&entry(
            3,
            2_000,
            ResourceCreated {
                activity_seq: seq(2),
                attempt: 1,
                resource: ResourceRef {
                    provider: "aws".into(),
                    kind: "ec2:subnet".into(),
                    id: "subnet-1".into(),
                    region: None,
                    cluster: None,
                },
            },
        ));
        let done = progress.apply(&entry(4, 2_500, completed(2)));
        assert_eq!(
            done,
            vec!["   +2.5s  ✓ aws.create_subnet private us-east-1a  subnet-1  (1.5s)"]
        );
        assert!(progress.running().is_empty());
        assert_eq!(progress.created, 1);
    }

    #[test]
    fn retries_compensations_and_the_end_are_visible() {
        let mut progress = Progress::new();
        progress.apply(&entry(1, 0, started("create_hosted_cluster")));
        progress.apply(&entry(2, 0, scheduled("aws.create_vpc", json!({}), None)));
        let retry = progress.apply(&entry(
            3,
            1_000,
            ActivityFailed {
                scheduled_seq: seq(2),
                attempt: 1,
                failure: ActivityFailure::retryable("Throttling", "slow down"),
                retry_at: Some(Timestamp::from_millis(T0 + 3_000)),
            },
        ));
        assert_eq!(
            retry,
            vec!["   +1.0s  ↻ aws.create_vpc: attempt 1 failed (Throttling: slow down); retrying in 2.0s"]
        );
        assert_eq!(progress.retries, 1);
        progress.apply(&entry(
            4,
            4_000,
            scheduled("aws.delete_vpc", json!({}), Some(seq(2))),
        ));
        let undone = progress.apply(&entry(5, 5_000, completed(4)));
        assert_eq!(undone, vec!["   +5.0s  ↶ aws.delete_vpc  (1.0s)"]);
        let end = progress.apply(&entry(
            6,
            70_000,
            WorkflowCompensated {
                cause: WorkflowError::Activity {
                    activity_type: "aws.create_subnet".into(),
                    seq: seq(7),
                    failure: ActivityFailure::permanent("InvalidInput", "boom"),
                },
            },
        ));
        assert_eq!(
            end,
            vec!["  +1m10s  ● failed and rolled back, nothing left: activity aws.create_subnet (seq 7) failed: InvalidInput: boom"]
        );
        assert_eq!(
            progress.outcome.as_ref().map(Outcome::status),
            Some("compensated")
        );
    }

    #[test]
    fn an_event_this_code_cannot_read_is_shown() {
        let mut progress = Progress::new();
        progress.apply(&entry(1, 0, started("noop_chain")));
        let mut future = entry(2, 1_000, completed(1));
        future.kind = "FromTheFuture".into();
        let lines = progress.apply(&future);
        assert_eq!(lines.len(), 1);
        assert!(
            lines[0].contains("? event 2: unknown event kind"),
            "{lines:?}"
        );
    }
}
