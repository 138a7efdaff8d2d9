//! The audit export: a self-contained JSON-lines file with a workflow's whole chain and
//! its signed head, checkable offline — no database, no NATS.
//!
//! ```text
//! {"hcpflow_export":1,"workflow_id":"…","workflow_type":"…","status":"completed","events":213}
//! {"seq":1,"hash":"<hex>","event":<the exact canonical bytes that were hashed>}
//! …
//! {"checkpoint":{"workflow_id":"…","seq":213,"head_hash":"<hex>","key_id":"…","signature":"<hex>"}}
//! ```
//!
//! Reading checks everything, so that one changed byte anywhere, or a truncated file,
//! is caught: every line must be exactly as written (no reformatting), every event's
//! bytes canonical and hashing to its link of the chain, every envelope naming this
//! workflow and its own seq, the header agreeing with the history (type, status, count),
//! and the trailer a checkpoint of the last event signed by the audit key.

use hcpflow_engine::{
    canonical, history, AuditPublicKey, ChainHash, Checkpoint, Event, HistoryEvent, Seq, Timestamp,
    WorkflowId,
};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;

pub const FORMAT_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Header {
    pub hcpflow_export: u32,
    pub workflow_id: String,
    pub workflow_type: String,
    pub status: String,
    pub events: u64,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct EventLine<'a> {
    seq: u64,
    hash: String,
    #[serde(borrow)]
    event: &'a RawValue,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Trailer {
    checkpoint: Checkpoint,
}

/// One event for [`write`]: its seq, stored hash and exact stored bytes.
#[derive(Debug, Clone)]
pub struct RawEvent {
    pub seq: u64,
    pub hash: String,
    pub body: String,
}

/// Why a file does not verify: the line (1-based) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {reason}")]
pub struct FileError {
    pub line: usize,
    pub reason: String,
}

/// A file that verified.
#[derive(Debug, Clone)]
pub struct VerifiedExport {
    pub header: Header,
    pub workflow_id: WorkflowId,
    pub history: Vec<HistoryEvent>,
    pub checkpoint: Checkpoint,
}

/// The file's text.
pub fn write(
    header: &Header,
    events: &[RawEvent],
    checkpoint: &Checkpoint,
) -> Result<String, serde_json::Error> {
    let mut text = serde_json::to_string(header)?;
    text.push('\n');
    for event in events {
        let raw = RawValue::from_string(event.body.clone())?;
        let line = EventLine {
            seq: event.seq,
            hash: event.hash.clone(),
            event: &raw,
        };
        text.push_str(&serde_json::to_string(&line)?);
        text.push('\n');
    }
    text.push_str(&serde_json::to_string(&Trailer {
        checkpoint: checkpoint.clone(),
    })?);
    text.push('\n');
    Ok(text)
}

/// Checks the file against `key`; the history it holds when everything verifies.
pub fn read(text: &str, key: &AuditPublicKey) -> Result<VerifiedExport, FileError> {
    let fail = |line: usize, reason: String| FileError { line, reason };
    let Some(body) = text.strip_suffix('\n') else {
        return Err(fail(
            text.lines().count().max(1),
            "the file does not end with a newline: truncated?".into(),
        ));
    };
    let lines: Vec<&str> = body.split('\n').collect();
    let header_line = lines[0];
    let header: Header = serde_json::from_str(header_line)
        .map_err(|e| fail(1, format!("not an hcpflow export header: {e}")))?;
    exact(header_line, &header).map_err(|r| fail(1, r))?;
    if header.hcpflow_export != FORMAT_VERSION {
        return Err(fail(
            1,
            format!(
                "export format {} is not {FORMAT_VERSION}",
                header.hcpflow_export
            ),
        ));
    }
    let workflow_id = WorkflowId::new(header.workflow_id.clone())
        .map_err(|e| fail(1, format!("workflow_id: {e}")))?;
    let expected_lines = usize::try_from(header.events)
        .ok()
        .and_then(|n| n.checked_add(2))
        .ok_or_else(|| fail(1, "events: too many".into()))?;
    if lines.len() != expected_lines {
        return Err(fail(
            lines.len().min(expected_lines),
            format!(
                "the header announces {} events, the file holds {} lines (expected {expected_lines}): truncated or extended",
                header.events,
                lines.len()
            ),
        ));
    }

    let mut prev = ChainHash::GENESIS;
    let mut history = Vec::with_capacity(lines.len() - 2);
    for (index, line) in lines[1..lines.len() - 1].iter().enumerate() {
        let number = index + 2;
        let seq = index as u64 + 1;
        let parsed: EventLine<'_> = serde_json::from_str(line)
            .map_err(|e| fail(number, format!("not an event line: {e}")))?;
        exact(line, &parsed).map_err(|r| fail(number, r))?;
        if parsed.seq != seq {
            return Err(fail(
                number,
                format!("seq {} where {seq} belongs", parsed.seq),
            ));
        }
        let bytes = parsed.event.get().as_bytes();
        if !canonical::is_canonical(bytes) {
            return Err(fail(
                number,
                format!("event {seq} is not in canonical form"),
            ));
        }
        let hash = prev.next(bytes);
        if hash.to_hex() != parsed.hash {
            return Err(fail(
                number,
                format!("event {seq} does not hash to its link of the chain"),
            ));
        }
        history.push(to_history_event(&workflow_id, seq, bytes).map_err(|r| fail(number, r))?);
        prev = hash;
    }

    let last = lines.len();
    let trailer: Trailer = serde_json::from_str(lines[last - 1])
        .map_err(|e| fail(last, format!("not a signed checkpoint: {e}")))?;
    exact(lines[last - 1], &trailer).map_err(|r| fail(last, r))?;
    let checkpoint = trailer.checkpoint;
    if checkpoint.workflow_id != workflow_id
        || checkpoint.seq.get() != header.events
        || checkpoint.head_hash != prev
    {
        return Err(fail(
            last,
            format!(
                "the checkpoint (workflow {}, seq {}, head {}) is not the head of this history (seq {}, head {prev})",
                checkpoint.workflow_id, checkpoint.seq, checkpoint.head_hash, header.events
            ),
        ));
    }
    key.verify(&checkpoint)
        .map_err(|e| fail(last, e.to_string()))?;

    // The header's other claims must be what the history says.
    let Some(Event::WorkflowStarted(started)) = history.first().map(|e| &e.event) else {
        return Err(fail(
            2,
            "the history does not begin with WorkflowStarted".into(),
        ));
    };
    if started.workflow_type != header.workflow_type {
        return Err(fail(
            1,
            format!(
                "workflow_type {:?}, but the history started {:?}",
                header.workflow_type, started.workflow_type
            ),
        ));
    }
    let status = history::status(&history);
    if status.as_str() != header.status {
        return Err(fail(
            1,
            format!("status {:?}, but the history says {status}", header.status),
        ));
    }
    Ok(VerifiedExport {
        header,
        workflow_id,
        history,
        checkpoint,
    })
}

/// The line must be byte for byte what this code writes for the value it holds.
fn exact<T: Serialize>(line: &str, value: &T) -> Result<(), String> {
    let written = serde_json::to_string(value).map_err(|e| e.to_string())?;
    if written == line {
        Ok(())
    } else {
        Err("the line is not as exported (changed, or reformatted)".into())
    }
}

/// The engine's event from an envelope `{"data", "recorded_at", "seq", "type",
/// "workflow_id"}`, checking that it names this workflow and seq.
pub fn to_history_event(
    workflow_id: &WorkflowId,
    seq: u64,
    bytes: &[u8],
) -> Result<HistoryEvent, String> {
    let mut envelope: Value = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    if envelope["workflow_id"] != workflow_id.as_str() || envelope["seq"] != seq {
        return Err(format!(
            "event {seq} belongs to workflow {} seq {}",
            envelope["workflow_id"], envelope["seq"]
        ));
    }
    let kind = envelope["type"].as_str().unwrap_or_default().to_owned();
    let recorded_at = envelope["recorded_at"]
        .as_str()
        .and_then(|t| t.parse::<chrono::DateTime<chrono::Utc>>().ok())
        .ok_or_else(|| format!("event {seq}: recorded_at is not a time"))?;
    let event = Event::from_record(&kind, envelope["data"].take())
        .map_err(|e| format!("event {seq}: {e}"))?;
    Ok(HistoryEvent {
        seq: Seq::new(seq).map_err(|e| e.to_string())?,
        recorded_at: Timestamp::from_millis(
            u64::try_from(recorded_at.timestamp_millis()).unwrap_or(0),
        ),
        event,
    })
}

#[cfg(test)]
mod tests {
    use hcpflow_engine::{AuditSigningKey, Event};
    use serde_json::json;

    use super::*;

    fn key() -> AuditSigningKey {
        AuditSigningKey::from_text(&"2a".repeat(32)).unwrap()
    }

    /// A two-event history (started, completed) exported and signed.
    fn export() -> String {
        let id = WorkflowId::new("wf-export").unwrap();
        let events = [
            Event::from_record("WorkflowStarted", json!({"workflow_type": "noop_chain", "input": {"steps": 0}, "concurrency_key": null, "parent": null, "v": 1})).unwrap(),
            Event::from_record("WorkflowCompleted", json!({"output": {"done": true}, "v": 1})).unwrap(),
        ];
        let mut prev = ChainHash::GENESIS;
        let mut raw = Vec::new();
        for (index, event) in events.iter().enumerate() {
            let (kind, data) = event.to_record();
            let envelope = json!({"data": data, "recorded_at": "2026-11-23T10:00:00.000000Z",
                                  "seq": index + 1, "type": kind, "workflow_id": id.as_str()});
            let body = String::from_utf8(canonical::to_vec(&envelope)).unwrap();
            prev = prev.next(body.as_bytes());
            raw.push(RawEvent {
                seq: index as u64 + 1,
                hash: prev.to_hex(),
                body,
            });
        }
        let header = Header {
            hcpflow_export: FORMAT_VERSION,
            workflow_id: id.to_string(),
            workflow_type: "noop_chain".into(),
            status: "completed".into(),
            events: 2,
        };
        let checkpoint = key().sign(&id, Seq::new(2).unwrap(), prev);
        write(&header, &raw, &checkpoint).unwrap()
    }

    #[test]
    fn an_export_verifies_and_every_changed_byte_or_truncation_is_caught() {
        let text = export();
        let verified = read(&text, key().public_key()).unwrap();
        assert_eq!(verified.history.len(), 2);
        let bytes = text.as_bytes();
        for at in 0..bytes.len() {
            for flip in [0x01u8, 0x20] {
                let mut changed = bytes.to_vec();
                changed[at] ^= flip;
                let Ok(changed) = String::from_utf8(changed) else {
                    continue;
                };
                assert!(
                    read(&changed, key().public_key()).is_err(),
                    "byte {at} ^ {flip:#x} went unnoticed: {:?}",
                    &text[at.saturating_sub(20)..(at + 20).min(text.len())]
                );
            }
        }
        for length in 0..bytes.len() {
            assert!(
                read(&text[..length], key().public_key()).is_err(),
                "truncation to {length} bytes went unnoticed"
            );
        }
        let stranger = AuditSigningKey::from_text(&"3b".repeat(32)).unwrap();
        assert!(read(&text, stranger.public_key()).is_err());
    }
}
