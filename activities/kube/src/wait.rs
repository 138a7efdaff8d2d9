//! Waiting on an object's status: poll, read its conditions, give up at a deadline with
//! the condition that blocks.
//!
//! Polling (not a watch) on purpose: a wait outlives API server restarts and
//! compaction, a get answers the one question asked, and the interval is configurable.
//! The activity worker heartbeats while a wait runs.

use std::future::Future;
use std::time::Duration;

use hcpflow_engine::ActivityFailure;
use serde_json::Value;
use tokio::time::Instant;

/// One look at the object.
#[derive(Debug)]
pub enum Look<T> {
    Done(T),
    /// Not yet, and why (the blocking condition), for the timeout's message.
    Waiting(String),
}

/// Calls `look` every `interval` until it is done or fails; after `timeout`, a
/// permanent `Timeout` failure naming `what` and the last reason it was waiting.
pub async fn poll<T, F, Fut>(
    what: &str,
    timeout: Duration,
    interval: Duration,
    mut look: F,
) -> Result<T, ActivityFailure>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Look<T>, ActivityFailure>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        let why = match look().await? {
            Look::Done(value) => return Ok(value),
            Look::Waiting(why) => why,
        };
        if Instant::now() + interval > deadline {
            return Err(ActivityFailure::permanent(
                "Timeout",
                format!("{what} after {:.1}s: {why}", timeout.as_secs_f64()),
            ));
        }
        tokio::time::sleep(interval).await;
    }
}

/// A condition of `status.conditions`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    pub kind: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    pub reason: String,
    pub message: String,
}

impl Condition {
    pub fn is_true(&self) -> bool {
        self.status == "True"
    }
}

impl std::fmt::Display for Condition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}={}", self.kind, self.status)?;
        if !self.reason.is_empty() {
            write!(f, " ({})", self.reason)?;
        }
        if !self.message.is_empty() {
            write!(f, ": {}", self.message)?;
        }
        Ok(())
    }
}

/// Every condition of an object's `status` (empty when it has none yet).
pub fn conditions(status: Option<&Value>) -> Vec<Condition> {
    let text = |c: &Value, key: &str| c.get(key).and_then(Value::as_str).unwrap_or("").to_owned();
    status
        .and_then(|s| s.get("conditions"))
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .map(|c| Condition {
                    kind: text(c, "type"),
                    status: text(c, "status"),
                    reason: text(c, "reason"),
                    message: text(c, "message"),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The condition of type `kind`, if reported.
pub fn find<'a>(conditions: &'a [Condition], kind: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.kind == kind)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn conditions_are_read_and_shown_with_reason_and_message() {
        let status = json!({"conditions": [
            {"type": "Available", "status": "False", "reason": "WaitingForAvailable", "message": "KAS down"},
            {"type": "Degraded", "status": "False"}
        ]});
        let found = conditions(Some(&status));
        assert_eq!(found.len(), 2);
        let available = find(&found, "Available").unwrap();
        assert!(!available.is_true());
        assert_eq!(
            available.to_string(),
            "Available=False (WaitingForAvailable): KAS down"
        );
        assert!(conditions(None).is_empty());
    }

    #[tokio::test]
    async fn a_poll_gives_up_at_its_deadline_with_the_last_reason() {
        let mut looks = 0;
        let outcome: Result<(), _> = poll(
            "not ready",
            Duration::from_millis(200),
            Duration::from_millis(20),
            || {
                looks += 1;
                let n = looks;
                async move { Ok(Look::Waiting(format!("look {n}"))) }
            },
        )
        .await;
        let failure = outcome.unwrap_err();
        assert_eq!(failure.kind, "Timeout");
        assert!(!failure.retryable);
        assert!(
            failure.message.starts_with("not ready after 0.2s: look "),
            "{}",
            failure.message
        );
        assert!(looks >= 5, "{looks} looks");
    }
}
