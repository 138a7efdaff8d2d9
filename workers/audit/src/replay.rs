//! Replaying a recorded history against today's workflow code for an audit: does the
//! code still make exactly the recorded decisions? Plus what the history says was done
//! to the cloud (the resource ledger) and what a destroy would still undo. Pure: the
//! history in, a report out; no database, no NATS.

use std::collections::BTreeMap;

use hcpflow_engine::{
    history, run_workflow_task, Event, ExecError, HistoryEvent, SeededEntropy, WorkflowId,
    WorkflowRegistry,
};
use hcpflow_hypershift::destroy::destroy_order;
use hcpflow_hypershift::registry::PendingCompensation;
use serde::Serialize;

use crate::step_label;

/// The first point where today's code and the history part ways.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Divergence {
    pub seq: u64,
    pub recorded: String,
    pub new: String,
}

/// One object the history created or deleted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LedgerLine {
    pub action: &'static str,
    pub provider: String,
    pub kind: String,
    pub id: String,
    /// The step (activity) that did it, its seq and attempt.
    pub step: String,
    pub step_seq: u64,
    pub attempt: u32,
    pub at: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplayReport {
    pub events: usize,
    pub status: String,
    /// `None`: deterministic — the code makes exactly the recorded decisions.
    pub divergence: Option<Divergence>,
    pub ledger: Vec<LedgerLine>,
    /// What a destroy would run, in its order (compensations not yet run or failed).
    pub destroy_would_run: Vec<String>,
}

/// Replays `history` with the workflow code in `registry`.
pub fn replay(
    registry: &WorkflowRegistry,
    workflow_id: &WorkflowId,
    history: &[HistoryEvent],
) -> ReplayReport {
    let status = history::status(history);
    let divergence = match run_workflow_task(
        registry,
        workflow_id,
        history,
        Box::new(SeededEntropy::new(0)),
    ) {
        // An ended workflow must replay to nothing new; a live one to its next commands.
        Ok(outcome) if status.is_terminal() && !outcome.commands.is_empty() => Some(Divergence {
            seq: outcome.first_seq.get(),
            recorded: format!("the end of the history ({status})"),
            new: outcome.commands[0].kind().to_owned(),
        }),
        Ok(_) => None,
        Err(ExecError::Nondeterminism { seq, recorded, new }) => Some(Divergence {
            seq: seq.get(),
            recorded,
            new,
        }),
        Err(other) => Some(Divergence {
            seq: history.len() as u64,
            recorded: "a history today's code can run".to_owned(),
            new: other.to_string(),
        }),
    };
    ReplayReport {
        events: history.len(),
        status: status.as_str().to_owned(),
        divergence,
        ledger: ledger(history),
        destroy_would_run: destroy_would_run(history),
    }
}

fn ledger(history: &[HistoryEvent]) -> Vec<LedgerLine> {
    let labels: BTreeMap<u64, String> = history
        .iter()
        .filter_map(|e| match &e.event {
            Event::ActivityScheduled(s) => {
                Some((e.seq.get(), step_label(&s.activity_type, &s.input)))
            }
            _ => None,
        })
        .collect();
    history
        .iter()
        .filter_map(|e| {
            let (action, record) = match &e.event {
                Event::ResourceCreated(r) => ("created", (r.activity_seq, r.attempt, &r.resource)),
                Event::ResourceDeleted(r) => ("deleted", (r.activity_seq, r.attempt, &r.resource)),
                Event::ResourceObserved(r) => {
                    ("observed", (r.activity_seq, r.attempt, &r.resource))
                }
                _ => return None,
            };
            let (step_seq, attempt, resource) = record;
            Some(LedgerLine {
                action,
                provider: resource.provider.clone(),
                kind: resource.kind.clone(),
                id: resource.id.clone(),
                step: labels.get(&step_seq.get()).cloned().unwrap_or_default(),
                step_seq: step_seq.get(),
                attempt,
                at: chrono::DateTime::from_timestamp_millis(
                    i64::try_from(e.recorded_at.as_millis()).unwrap_or(0),
                )
                .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
                .unwrap_or_default(),
            })
        })
        .collect()
}

fn destroy_would_run(history: &[HistoryEvent]) -> Vec<String> {
    destroy_order(&PendingCompensation::of(history))
        .iter()
        .map(|c| step_label(&c.activity_type, &c.input))
        .collect()
}
