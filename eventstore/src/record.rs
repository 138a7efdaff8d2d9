//! What an event looks like going into the store and coming out of it.
//!
//! The hashed, stored bytes are the canonical JSON (see `hcpflow_engine::canonical`) of
//! the envelope `{"data", "recorded_at", "seq", "type", "workflow_id"}`. Putting the
//! workflow id and seq inside the hashed bytes means an event cannot be moved to another
//! workflow or position without breaking the chain.

use std::sync::LazyLock;

use chrono::format::{Item, StrftimeItems};
use chrono::{DateTime, SubsecRound, Utc};
use hcpflow_engine::{canonical, ChainHash, Event, HistoryEvent, Seq, Timestamp, WorkflowId};
use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::error::{Error, Result};

/// An event to append: its kind and its JSON data.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    pub event_type: String,
    pub data: Value,
}

impl NewEvent {
    pub fn new(event_type: impl Into<String>, data: Value) -> Self {
        Self {
            event_type: event_type.into(),
            data,
        }
    }
}

impl From<&Event> for NewEvent {
    fn from(event: &Event) -> Self {
        let (kind, data) = event.to_record();
        Self::new(kind, data)
    }
}

/// One event as stored, with its chain links.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredEvent {
    pub workflow_id: WorkflowId,
    pub seq: Seq,
    pub event_type: String,
    pub recorded_at: DateTime<Utc>,
    /// The exact canonical bytes that were hashed.
    pub body: Vec<u8>,
    pub prev_hash: ChainHash,
    pub hash: ChainHash,
}

/// The part of an envelope most readers need, borrowed from the stored bytes.
#[derive(serde::Deserialize)]
struct EnvelopeData<'a> {
    #[serde(borrow)]
    data: Option<&'a RawValue>,
}

impl StoredEvent {
    /// The event's data, parsed from the stored bytes.
    pub fn data(&self) -> Result<Value> {
        match self.raw_data()? {
            Some(raw) => serde_json::from_str(raw.get()).map_err(|error| self.corrupt(error)),
            None => Ok(Value::Null),
        }
    }

    /// The event's data as it is written in the stored bytes, without building it.
    fn raw_data(&self) -> Result<Option<&RawValue>> {
        let envelope: EnvelopeData<'_> =
            serde_json::from_slice(&self.body).map_err(|error| self.corrupt(error))?;
        Ok(envelope.data)
    }

    fn corrupt(&self, error: serde_json::Error) -> Error {
        Error::Corrupt {
            workflow_id: self.workflow_id.to_string(),
            seq: self.seq.get(),
            reason: format!("stored bytes are not JSON: {error}"),
        }
    }
}

impl StoredEvent {
    /// The engine's view of this event.
    ///
    /// # Errors
    /// [`Error::Decode`] when the kind is unknown to this code or its schema is newer.
    pub fn to_history_event(&self) -> Result<HistoryEvent> {
        let event =
            Event::from_record(&self.event_type, self.data()?).map_err(|source| Error::Decode {
                workflow_id: self.workflow_id.to_string(),
                seq: self.seq.get(),
                source,
            })?;
        let millis = u64::try_from(self.recorded_at.timestamp_millis()).unwrap_or(0);
        Ok(HistoryEvent {
            seq: self.seq,
            recorded_at: Timestamp::from_millis(millis),
            event,
        })
    }
}

/// A history entry: `{"seq", "type", "recorded_at", "data", "hash", "prev_hash"}`, plus
/// `workflow_id` when asked — the shape of the history API and the events stream.
pub fn entry_json(event: &StoredEvent, with_workflow_id: bool) -> Value {
    serde_json::from_slice(&entry_bytes(event, with_workflow_id)).unwrap_or(Value::Null)
}

/// [`entry_json`] as JSON text, written straight from the stored bytes (the events
/// stream's hot path: the event's data is copied, never parsed into a tree).
pub fn entry_bytes(event: &StoredEvent, with_workflow_id: bool) -> Vec<u8> {
    #[derive(serde::Serialize)]
    struct Entry<'a> {
        seq: u64,
        #[serde(rename = "type")]
        event_type: &'a str,
        recorded_at: String,
        data: &'a RawValue,
        hash: String,
        prev_hash: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        workflow_id: Option<&'a str>,
    }
    let null = RawValue::NULL;
    let data = event.raw_data().ok().flatten().unwrap_or(null);
    let entry = Entry {
        seq: event.seq.get(),
        event_type: &event.event_type,
        recorded_at: format_timestamp(event.recorded_at),
        data,
        hash: event.hash.to_hex(),
        prev_hash: event.prev_hash.to_hex(),
        workflow_id: with_workflow_id.then(|| event.workflow_id.as_str()),
    };
    serde_json::to_vec(&entry).unwrap_or_default()
}

/// Postgres keeps microseconds; truncating first makes the column and the hashed text agree.
pub(crate) fn store_precision(at: DateTime<Utc>) -> DateTime<Utc> {
    at.trunc_subsecs(6)
}

/// How a recorded time is written where it is hashed and published. The bytes are part
/// of every event's hashed envelope: this format never changes.
const TIMESTAMP_FORMAT: &str = "%Y-%m-%dT%H:%M:%S%.6fZ";

/// [`TIMESTAMP_FORMAT`] parsed once: every event is formatted at least twice (its
/// envelope, its message on the events stream).
static TIMESTAMP_ITEMS: LazyLock<Vec<Item<'static>>> =
    LazyLock::new(|| StrftimeItems::new(TIMESTAMP_FORMAT).collect());

pub(crate) fn format_timestamp(at: DateTime<Utc>) -> String {
    at.format_with_items(TIMESTAMP_ITEMS.iter()).to_string()
}

/// The canonical bytes of one event's envelope.
pub(crate) fn envelope_bytes(
    workflow_id: &WorkflowId,
    seq: Seq,
    recorded_at: DateTime<Utc>,
    event: &NewEvent,
) -> Vec<u8> {
    let workflow_id = Value::from(workflow_id.as_str());
    let seq = Value::from(seq.get());
    let kind = Value::from(event.event_type.as_str());
    let recorded_at = Value::String(format_timestamp(recorded_at));
    // The data is written where it is: copying it into an envelope object was most of
    // the cost of chaining an append.
    canonical::object_to_vec(&mut [
        ("workflow_id", &workflow_id),
        ("seq", &seq),
        ("type", &kind),
        ("recorded_at", &recorded_at),
        ("data", &event.data),
    ])
}

/// Checks that a stored row says what its hashed bytes say; returns the reason if not.
pub(crate) fn envelope_mismatch(event: &StoredEvent) -> Option<String> {
    // Parsed once: the canonical check writes the parsed value again and compares.
    let envelope: Value = match serde_json::from_slice(&event.body) {
        Ok(value) => value,
        Err(error) => return Some(format!("stored bytes are not JSON: {error}")),
    };
    if canonical::to_vec(&envelope) != event.body {
        return Some("stored bytes are not in canonical form".to_owned());
    }
    let expected = [
        ("workflow_id", json!(event.workflow_id.as_str())),
        ("seq", json!(event.seq.get())),
        ("type", json!(event.event_type)),
        ("recorded_at", json!(format_timestamp(event.recorded_at))),
    ];
    expected.into_iter().find_map(|(field, value)| {
        let stored = envelope.get(field);
        (stored != Some(&value)).then(|| {
            format!(
                "column {field} is {value} but the hashed bytes say {}",
                stored.map_or_else(|| "nothing".to_owned(), Value::to_string)
            )
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The envelope is the canonical form of the object it names, byte for byte: the
    /// chain hashes of every stored event depend on it.
    #[test]
    fn the_envelope_is_the_canonical_object() {
        let id = WorkflowId::new("wf-1").unwrap();
        let at = DateTime::parse_from_rfc3339("2026-11-28T10:52:44.123456Z")
            .unwrap()
            .with_timezone(&Utc);
        let data = json!({"z": [1, 2.5, {"b": null, "a": "é\n\"q\""}], "v": 1, "a": {}});
        let event = NewEvent::new("ActivityScheduled", data.clone());
        let expected = canonical::to_vec(&json!({
            "workflow_id": "wf-1",
            "seq": 7,
            "type": "ActivityScheduled",
            "recorded_at": "2026-11-28T10:52:44.123456Z",
            "data": data,
        }));
        assert_eq!(
            envelope_bytes(&id, Seq::new(7).unwrap(), at, &event),
            expected
        );
    }

    #[test]
    fn timestamps_are_written_as_the_format_says() {
        let at = DateTime::parse_from_rfc3339("2026-11-28T10:52:44.123456Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(format_timestamp(at), "2026-11-28T10:52:44.123456Z");
        for at in [at, DateTime::UNIX_EPOCH, Utc::now()] {
            assert_eq!(
                format_timestamp(at),
                at.format(TIMESTAMP_FORMAT).to_string()
            );
        }
    }

    fn sample() -> StoredEvent {
        let workflow_id = WorkflowId::new("wf-1").unwrap();
        let recorded_at = store_precision(Utc::now());
        let event = NewEvent::new("TimerFired", json!({"timer": 3}));
        let body = envelope_bytes(&workflow_id, Seq::FIRST, recorded_at, &event);
        StoredEvent {
            workflow_id,
            seq: Seq::FIRST,
            event_type: event.event_type,
            recorded_at,
            hash: ChainHash::GENESIS.next(&body),
            body,
            prev_hash: ChainHash::GENESIS,
        }
    }

    #[test]
    fn a_consistent_row_has_no_mismatch() {
        let event = sample();
        assert_eq!(envelope_mismatch(&event), None);
        assert_eq!(event.data().unwrap(), json!({"timer": 3}));
    }

    #[test]
    fn a_column_that_disagrees_with_the_bytes_is_named() {
        let mut event = sample();
        event.event_type = "ActivityCompleted".into();
        let reason = envelope_mismatch(&event).unwrap();
        assert!(reason.contains("column type"), "{reason}");

        let mut event = sample();
        event.seq = Seq::new(2).unwrap();
        assert!(envelope_mismatch(&event).unwrap().contains("column seq"));
    }
}
