//! What a user watching a workflow sees: history entries (as the history API and the
//! events stream carry them) turned into one line per step, with the AWS and
//! Kubernetes ids as they appear, retries and compensations. Pure: entries in, lines
//! out; [`crate::cli::follow`] feeds it and draws the spinner.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
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

    /// Applies one history entry; returns the lines it produces (none for most).
    pub fn apply(&mut self, entry: &Value) -> Vec<String> {
        self.events += 1;
        let at = entry["recorded_at"]
            .as_str()
            .and_then(|text| text.parse::<DateTime<Utc>>().ok());
        if at.is_some() {
            self.last_at = at;
        }
        let seq = entry["seq"].as_u64().unwrap_or_default();
        let data = &entry["data"];
        let kind = entry["type"].as_str().unwrap_or_default();
        let stamp = self.stamp(at);
        match kind {
            "WorkflowStarted" => {
                self.started_at = at;
                self.workflow_type = data["workflow_type"].as_str().map(str::to_owned);
                vec![format!(
                    "{stamp}  ▶ {} started",
                    data["workflow_type"].as_str().unwrap_or("workflow")
                )]
            }
            "ActivityScheduled" => {
                let compensation = !data["compensation_of"].is_null();
                let step = Step {
                    label: step_label(
                        data["activity_type"].as_str().unwrap_or("activity"),
                        &data["input"],
                    ),
                    scheduled_at: at,
                    compensation,
                };
                self.steps.insert(seq, step.clone());
                self.running.insert(seq, step);
                if compensation {
                    self.compensations += 1;
                }
                Vec::new()
            }
            "ResourceCreated" | "ResourceDeleted" | "ResourceObserved" => {
                match kind {
                    "ResourceCreated" => self.created += 1,
                    "ResourceDeleted" => self.deleted += 1,
                    _ => self.observed += 1,
                }
                let step = data["activity_seq"].as_u64().unwrap_or_default();
                if let Some(id) = data["resource"]["id"].as_str() {
                    self.ids.entry(step).or_default().push(id.to_owned());
                }
                Vec::new()
            }
            "ActivityCompleted" => {
                let scheduled = data["scheduled_seq"].as_u64().unwrap_or_default();
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
            "ActivityFailed" => {
                let scheduled = data["scheduled_seq"].as_u64().unwrap_or_default();
                self.ids.remove(&scheduled);
                let label = self
                    .steps
                    .get(&scheduled)
                    .map(|s| s.label.clone())
                    .unwrap_or_else(|| format!("step {scheduled}"));
                let attempt = data["attempt"].as_u64().unwrap_or_default();
                let reason = failure_text(&data["failure"]);
                match data["retry_at"]
                    .as_str()
                    .and_then(|t| t.parse::<DateTime<Utc>>().ok())
                {
                    Some(retry_at) => {
                        self.retries += 1;
                        let wait = at.map(|at| format!(" in {}", seconds(retry_at - at)));
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
            "RollbackStarted" => vec![format!(
                "{stamp}  ⟲ rolling back {} step(s): {}",
                data["compensations"].as_u64().unwrap_or_default(),
                error_text(&data["cause"])
            )],
            "CancelRequested" => vec![format!(
                "{stamp}  ■ cancel requested{}",
                data["reason"]
                    .as_str()
                    .map(|r| format!(": {r}"))
                    .unwrap_or_default()
            )],
            "TimerStarted" => {
                let ms = data["duration_ms"].as_u64().unwrap_or_default();
                vec![format!("{stamp}  ⏲ waiting {:.1}s", ms as f64 / 1000.0)]
            }
            "SignalReceived" => vec![format!(
                "{stamp}  ✉ signal {}",
                data["name"].as_str().unwrap_or("?")
            )],
            "WorkflowCompleted" => self.end(
                stamp,
                Outcome::Completed {
                    output: data["output"].clone(),
                },
            ),
            "WorkflowCompensated" => self.end(
                stamp,
                Outcome::Compensated {
                    cause: error_text(&data["cause"]),
                },
            ),
            "WorkflowFailed" => {
                let left = data["left"]
                    .as_array()
                    .map(|left| {
                        left.iter()
                            .map(|l| {
                                format!(
                                    "{} ({})",
                                    step_label(
                                        l["activity_type"].as_str().unwrap_or("?"),
                                        &l["input"]
                                    ),
                                    l["reason"].as_str().unwrap_or("")
                                )
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                self.end(
                    stamp,
                    Outcome::Failed {
                        error: error_text(&data["error"]),
                        left,
                    },
                )
            }
            "WorkflowCancelled" => self.end(
                stamp,
                Outcome::Cancelled {
                    reason: data["reason"].as_str().map(str::to_owned),
                },
            ),
            _ => Vec::new(),
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

fn failure_text(failure: &Value) -> String {
    match serde_json::from_value::<hcpflow_engine::ActivityFailure>(failure.clone()) {
        Ok(failure) => failure.to_string(),
        Err(_) => failure.to_string(),
    }
}

fn error_text(error: &Value) -> String {
    match serde_json::from_value::<hcpflow_engine::WorkflowError>(error.clone()) {
        Ok(error) => error.to_string(),
        Err(_) => error
            .as_str()
            .map(str::to_owned)
            .unwrap_or_else(|| error.to_string()),
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
    use serde_json::json;

    use super::*;

    fn entry(seq: u64, at: &str, kind: &str, data: Value) -> Value {
        json!({"seq": seq, "type": kind, "recorded_at": at, "data": data})
    }

    #[test]
    fn a_step_is_one_line_with_its_ids_and_duration() {
        let mut progress = Progress::new();
        let start = progress.apply(&entry(
            1,
            "2026-11-23T10:00:00Z",
            "WorkflowStarted",
            json!({"workflow_type": "create_hosted_cluster", "input": {}}),
        ));
        assert_eq!(start, vec!["   +0.0s  ▶ create_hosted_cluster started"]);
        assert!(progress
            .apply(&entry(
                2,
                "2026-11-23T10:00:01Z",
                "ActivityScheduled",
                json!({"activity_type": "aws.create_subnet", "input": {"zone": "us-east-1a", "exposure": "private", "cidr_block": "10.0.0.0/20"}, "compensation_of": null})
            ))
            .is_empty());
        assert_eq!(
            progress.running(),
            vec!["aws.create_subnet private us-east-1a"]
        );
        progress.apply(&entry(
            3,
            "2026-11-23T10:00:02Z",
            "ResourceCreated",
            json!({"activity_seq": 2, "attempt": 1, "resource": {"id": "subnet-1", "kind": "ec2:subnet", "provider": "aws"}}),
        ));
        let done = progress.apply(&entry(
            4,
            "2026-11-23T10:00:02.5Z",
            "ActivityCompleted",
            json!({"scheduled_seq": 2, "attempt": 1, "result": {}}),
        ));
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
        progress.apply(&entry(
            1,
            "2026-11-23T10:00:00Z",
            "WorkflowStarted",
            json!({"workflow_type": "create_hosted_cluster"}),
        ));
        progress.apply(&entry(
            2,
            "2026-11-23T10:00:00Z",
            "ActivityScheduled",
            json!({"activity_type": "aws.create_vpc", "input": {}, "compensation_of": null}),
        ));
        let retry = progress.apply(&entry(
            3,
            "2026-11-23T10:00:01Z",
            "ActivityFailed",
            json!({"scheduled_seq": 2, "attempt": 1, "failure": {"kind": "Throttling", "message": "slow down", "retryable": true}, "retry_at": "2026-11-23T10:00:03Z"}),
        ));
        assert_eq!(
            retry,
            vec!["   +1.0s  ↻ aws.create_vpc: attempt 1 failed (Throttling: slow down); retrying in 2.0s"]
        );
        assert_eq!(progress.retries, 1);
        progress.apply(&entry(
            4,
            "2026-11-23T10:00:04Z",
            "ActivityScheduled",
            json!({"activity_type": "aws.delete_vpc", "input": {}, "compensation_of": 2}),
        ));
        let undone = progress.apply(&entry(
            5,
            "2026-11-23T10:00:05Z",
            "ActivityCompleted",
            json!({"scheduled_seq": 4, "attempt": 1}),
        ));
        assert_eq!(undone, vec!["   +5.0s  ↶ aws.delete_vpc  (1.0s)"]);
        let end = progress.apply(&entry(
            6,
            "2026-11-23T10:01:10Z",
            "WorkflowCompensated",
            json!({"cause": {"kind": "activity", "activity_type": "aws.create_subnet", "seq": 7, "failure": {"kind": "InvalidInput", "message": "boom", "retryable": false}}}),
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
}
