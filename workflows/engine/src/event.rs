//! The events of a history: a versioned, tagged set of kinds, one struct per kind.
//!
//! Stored as `(kind, data)`: the kind is the variant name and `data` is the struct's JSON
//! plus `"v"`, the schema version it was written with. Decoding an unknown kind or a
//! version newer than [`SCHEMA_VERSION`] is an explicit [`EventError`], never a skip:
//! histories outlive code.
//!
//! Kinds are either *commands* — emitted by workflow code (or the engine's saga) and
//! matched in order on replay — or *inputs* that arrive from outside (results, timers,
//! signals, cancellation) and wake the workflow.

mod activity;
mod child;
mod compensation;
mod patch;
mod resource;
mod side_effect;
mod signal;
mod timer;
mod workflow;

use serde_json::Value;
use sha2::{Digest, Sha256};

pub use activity::{ActivityCancelRequested, ActivityCompleted, ActivityFailed, ActivityScheduled};
pub use child::{ChildCompleted, ChildStarted};
pub use compensation::CompensationRegistered;
pub use patch::PatchMarked;
pub use resource::{ResourceCreated, ResourceDeleted, ResourceObserved, ResourceRef};
pub use side_effect::{SideEffectKind, SideEffectRecorded};
pub use signal::SignalReceived;
pub use timer::{TimerCancelled, TimerFired, TimerStarted};
pub use workflow::{
    CancelRequested, LeftBehind, ParentRef, RollbackStarted, WorkflowCancelled,
    WorkflowCompensated, WorkflowCompleted, WorkflowFailed, WorkflowStarted,
};

use crate::canonical;
use crate::ids::Seq;
use crate::time::Timestamp;

/// The schema version this code writes and the newest it reads.
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventError {
    #[error("unknown event kind {0:?}: this history was written by other code")]
    UnknownKind(String),
    #[error("event {kind} has schema version {version}; this code reads up to {SCHEMA_VERSION}")]
    NewerSchema { kind: String, version: u64 },
    #[error("event {kind} has no schema version")]
    MissingVersion { kind: String },
    #[error("event {kind} does not decode: {reason}")]
    Invalid { kind: String, reason: String },
}

macro_rules! event_kinds {
    ($( $kind:ident: $role:ident ),* $(,)?) => {
        /// One recorded fact of a workflow's history.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Event {
            $( $kind($kind), )*
        }

        impl Event {
            /// Every kind this code knows.
            pub const KINDS: &'static [&'static str] = &[$( stringify!($kind) ),*];

            /// The kind's stable name.
            pub fn kind(&self) -> &'static str {
                match self {
                    $( Event::$kind(_) => stringify!($kind), )*
                }
            }

            /// True for kinds emitted by workflow code and matched on replay.
            pub fn is_command(&self) -> bool {
                match self {
                    $( Event::$kind(_) => event_kinds!(@is_command $role), )*
                }
            }

            /// Writes the kind's fields as JSON (without `"v"`) to `out`.
            fn write_payload(&self, out: impl std::io::Write) -> Result<(), serde_json::Error> {
                match self {
                    $( Event::$kind(event) => serde_json::to_writer(out, event), )*
                }
            }

            fn payload(&self) -> Result<Value, serde_json::Error> {
                match self {
                    $( Event::$kind(event) => serde_json::to_value(event), )*
                }
            }

            fn decode_payload(kind: &str, data: Value) -> Result<Event, EventError> {
                let invalid = |error: serde_json::Error| EventError::Invalid {
                    kind: kind.to_owned(),
                    reason: error.to_string(),
                };
                match kind {
                    $( stringify!($kind) => serde_json::from_value(data).map(Event::$kind).map_err(invalid), )*
                    other => Err(EventError::UnknownKind(other.to_owned())),
                }
            }
        }

        $(
            impl From<$kind> for Event {
                fn from(event: $kind) -> Self {
                    Event::$kind(event)
                }
            }
        )*
    };
    (@is_command command) => { true };
    (@is_command input) => { false };
}

event_kinds! {
    WorkflowStarted: input,
    ActivityScheduled: command,
    ActivityCompleted: input,
    ActivityFailed: input,
    ActivityCancelRequested: command,
    TimerStarted: command,
    TimerFired: input,
    TimerCancelled: command,
    SignalReceived: input,
    SideEffectRecorded: command,
    ChildStarted: command,
    ChildCompleted: input,
    CompensationRegistered: command,
    PatchMarked: command,
    ResourceCreated: input,
    ResourceDeleted: input,
    ResourceObserved: input,
    CancelRequested: input,
    RollbackStarted: command,
    WorkflowCompleted: command,
    WorkflowFailed: command,
    WorkflowCancelled: command,
    WorkflowCompensated: command,
}

impl Event {
    /// The stored form: the kind and its data with `"v"`.
    pub fn to_record(&self) -> (&'static str, Value) {
        let mut data = match self.payload() {
            Ok(Value::Object(map)) => map,
            // Every kind is a struct; serde_json cannot fail on these types.
            Ok(other) => unreachable!("event {} serialised to {other}", self.kind()),
            Err(error) => unreachable!("event {} does not serialise: {error}", self.kind()),
        };
        data.insert("v".to_owned(), Value::from(SCHEMA_VERSION));
        (self.kind(), Value::Object(data))
    }

    /// How many bytes [`to_record`](Self::to_record)'s data takes as JSON (as
    /// `serde_json` writes it), counted without building it.
    pub fn record_data_len(&self) -> u64 {
        let mut counter = ByteCounter(0);
        // The counter takes every byte, and every kind serialises (see `to_record`).
        let _ = self.write_payload(&mut counter);
        // `"v":1` joins the fields: after a comma, unless there are none (`{}`).
        match counter.0 {
            2 => 2 + VERSION_ENTRY_LEN,
            fields => fields + 1 + VERSION_ENTRY_LEN,
        }
    }

    /// Decodes a stored `(kind, data)`.
    pub fn from_record(kind: &str, data: Value) -> Result<Event, EventError> {
        if !Self::KINDS.contains(&kind) {
            return Err(EventError::UnknownKind(kind.to_owned()));
        }
        let Value::Object(mut map) = data else {
            return Err(EventError::Invalid {
                kind: kind.to_owned(),
                reason: "data is not an object".into(),
            });
        };
        let version = map
            .remove("v")
            .ok_or_else(|| EventError::MissingVersion {
                kind: kind.to_owned(),
            })?
            .as_u64()
            .ok_or_else(|| EventError::Invalid {
                kind: kind.to_owned(),
                reason: "v is not a number".into(),
            })?;
        if version > u64::from(SCHEMA_VERSION) {
            return Err(EventError::NewerSchema {
                kind: kind.to_owned(),
                version,
            });
        }
        Self::decode_payload(kind, Value::Object(map))
    }

    /// True for the events that end a workflow.
    pub fn is_terminal(&self) -> bool {
        Self::is_terminal_kind(self.kind())
    }

    /// True for the kinds (as stored and on the events stream) that end a workflow.
    pub fn is_terminal_kind(kind: &str) -> bool {
        matches!(
            kind,
            "WorkflowCompleted" | "WorkflowFailed" | "WorkflowCancelled" | "WorkflowCompensated"
        )
    }

    /// Whether a command recorded in history is the same decision as a command emitted
    /// now. Results and outputs are not compared; identities and inputs are.
    pub fn same_command(&self, new: &Event) -> bool {
        match (self, new) {
            (Event::ActivityScheduled(a), Event::ActivityScheduled(b)) => {
                a.activity_type == b.activity_type
                    && a.input_digest == b.input_digest
                    && a.compensation_of == b.compensation_of
            }
            (Event::ActivityCancelRequested(a), Event::ActivityCancelRequested(b)) => {
                a.scheduled_seq == b.scheduled_seq
            }
            (Event::TimerCancelled(a), Event::TimerCancelled(b)) => a.started_seq == b.started_seq,
            (Event::SideEffectRecorded(a), Event::SideEffectRecorded(b)) => a.kind == b.kind,
            (Event::ChildStarted(a), Event::ChildStarted(b)) => {
                a.workflow_type == b.workflow_type && a.input_digest == b.input_digest
            }
            (Event::CompensationRegistered(a), Event::CompensationRegistered(b)) => {
                a.activity_type == b.activity_type && a.input_digest == b.input_digest
            }
            (Event::PatchMarked(a), Event::PatchMarked(b)) => a.patch_id == b.patch_id,
            (a, b) => a.kind() == b.kind(),
        }
    }

    /// A one-line description for nondeterminism reports.
    pub fn describe(&self) -> String {
        match self {
            Event::ActivityScheduled(a) => format!(
                "{}activity {} (input sha256 {})",
                if a.compensation_of.is_some() {
                    "compensation "
                } else {
                    ""
                },
                a.activity_type,
                short(&a.input_digest)
            ),
            Event::ActivityCancelRequested(c) => {
                format!("cancel of activity seq {}", c.scheduled_seq)
            }
            Event::TimerStarted(t) => format!("timer of {} ms", t.duration_ms),
            Event::TimerCancelled(t) => format!("cancel of timer seq {}", t.started_seq),
            Event::SideEffectRecorded(s) => format!("side effect {:?}", s.kind),
            Event::ChildStarted(c) => format!(
                "child workflow {} (input sha256 {})",
                c.workflow_type,
                short(&c.input_digest)
            ),
            Event::CompensationRegistered(c) => {
                format!(
                    "compensation {} (input sha256 {})",
                    c.activity_type,
                    short(&c.input_digest)
                )
            }
            Event::PatchMarked(p) => format!("patch marker {:?}", p.patch_id),
            other => other.kind().to_owned(),
        }
    }
}

fn short(digest: &str) -> &str {
    &digest[..digest.len().min(12)]
}

/// SHA-256 (hex) of a value's canonical bytes: how inputs are compared on replay.
pub fn digest(value: &Value) -> String {
    crate::lower_hex::lower_hex(&Sha256::digest(canonical::to_vec(value)))
}

/// An event at its place in a history.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryEvent {
    pub seq: Seq,
    /// When the store recorded it.
    pub recorded_at: Timestamp,
    pub event: Event,
}

/// The length of `"v":<SCHEMA_VERSION>`, the entry `to_record` adds to the data.
const VERSION_ENTRY_LEN: u64 = "\"v\":".len() as u64 + SCHEMA_VERSION.ilog10() as u64 + 1;

/// Counts the bytes written to it.
struct ByteCounter(u64);

impl std::io::Write for ByteCounter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0 += bytes.len() as u64;
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{ActivityFailure, WorkflowError};
    use crate::ids::Seq;
    use serde_json::json;

    #[test]
    fn record_round_trip_carries_the_version() {
        let event = Event::from(TimerStarted {
            duration_ms: 5,
            fire_at: Timestamp::from_millis(9),
        });
        let (kind, data) = event.to_record();
        assert_eq!(kind, "TimerStarted");
        assert_eq!(data["v"], 1);
        assert_eq!(Event::from_record(kind, data).unwrap(), event);
    }

    /// One of each kind of workflow error: a history must be able to record every one.
    fn every_workflow_error() -> Vec<WorkflowError> {
        vec![
            WorkflowError::Activity {
                activity_type: "aws.create_vpc".into(),
                seq: Seq::new(4).unwrap(),
                failure: ActivityFailure::permanent("Denied", "no"),
            },
            WorkflowError::Child {
                child_id: "c-1".into(),
                message: "failed".into(),
            },
            WorkflowError::Cancelled,
            WorkflowError::invalid_input("name: required"),
            WorkflowError::failed("left: sg-1"),
        ]
    }

    #[test]
    fn every_workflow_error_is_recorded_and_read_back_in_every_event_that_carries_one() {
        for error in every_workflow_error() {
            let events = [
                Event::from(WorkflowFailed {
                    error: error.clone(),
                    left: Vec::new(),
                }),
                Event::from(WorkflowCompensated {
                    cause: error.clone(),
                }),
                Event::from(RollbackStarted {
                    cause: error.clone(),
                    compensations: 2,
                }),
            ];
            for event in events {
                let (kind, data) = event.to_record();
                assert_eq!(data.pointer("/v"), Some(&json!(SCHEMA_VERSION)), "{kind}");
                let canonical = crate::canonical::to_vec(&data);
                let reread: Value = serde_json::from_slice(&canonical).unwrap();
                assert_eq!(
                    Event::from_record(kind, reread).unwrap(),
                    event,
                    "{error:?}"
                );
            }
        }
    }

    #[test]
    fn unknown_kinds_and_newer_versions_are_errors() {
        assert_eq!(
            Event::from_record("TeleportRequested", json!({"v": 1})),
            Err(EventError::UnknownKind("TeleportRequested".into()))
        );
        assert!(matches!(
            Event::from_record("TimerFired", json!({"v": 2, "started_seq": 3})),
            Err(EventError::NewerSchema { version: 2, .. })
        ));
        assert!(matches!(
            Event::from_record("TimerFired", json!({"started_seq": 3})),
            Err(EventError::MissingVersion { .. })
        ));
        assert!(matches!(
            Event::from_record("TimerFired", json!({"v": 1, "started_seq": "x"})),
            Err(EventError::Invalid { .. })
        ));
    }

    /// `record_data_len` is the stored data's size for the kinds the golden histories
    /// lack (those are checked in replay-tests), with empty, absent, nested, tagged and
    /// escaped values.
    #[test]
    fn the_counted_size_is_the_stored_size_for_every_other_kind() {
        let seq = Seq::new(7).unwrap();
        let child = crate::ids::WorkflowId::new("child-1").unwrap();
        let events: Vec<Event> = vec![
            TimerStarted {
                duration_ms: 10,
                fire_at: Timestamp::from_millis(1_700_000_000_123),
            }
            .into(),
            TimerFired { started_seq: seq }.into(),
            TimerCancelled { started_seq: seq }.into(),
            SignalReceived {
                name: "go \"now\"\n".into(),
                payload: json!({"b": [1.5, -2, null], "a": "é☃"}),
            }
            .into(),
            SideEffectRecorded {
                kind: SideEffectKind::Uuid,
                value: json!("0b1c"),
            }
            .into(),
            ChildStarted {
                child_id: child.clone(),
                workflow_type: "noop".into(),
                input: json!({}),
                input_digest: "ab".repeat(32),
            }
            .into(),
            ChildCompleted {
                started_seq: seq,
                outcome: Ok(json!([{"x": 1e-7}])),
            }
            .into(),
            ChildCompleted {
                started_seq: seq,
                outcome: Err(WorkflowError::Cancelled),
            }
            .into(),
            CancelRequested { reason: None }.into(),
            ActivityCancelRequested { scheduled_seq: seq }.into(),
            WorkflowFailed {
                error: WorkflowError::failed("boom"),
                left: Vec::new(),
            }
            .into(),
            WorkflowFailed {
                error: WorkflowError::Child {
                    child_id: child.to_string(),
                    message: "tab\t".into(),
                },
                left: vec![LeftBehind {
                    registered_seq: seq,
                    activity_type: "undo".into(),
                    input: json!({"k": true}),
                    reason: "kept".into(),
                }],
            }
            .into(),
            WorkflowCancelled {
                reason: Some("asked".into()),
            }
            .into(),
        ];
        for event in events {
            let (kind, data) = event.to_record();
            let stored = serde_json::to_vec(&data).unwrap().len() as u64;
            assert_eq!(event.record_data_len(), stored, "{kind}: {data}");
        }
    }

    #[test]
    fn every_kind_is_listed_once() {
        let mut kinds = Event::KINDS.to_vec();
        kinds.sort_unstable();
        kinds.dedup();
        assert_eq!(kinds.len(), Event::KINDS.len());
    }
}
