//! The API's replies: `{"ok": true, ...}`, or `{"ok": false, "error": {"code",
//! "message"}}` with one of the codes of DESIGN.md §4; and the checks every request
//! body passes first.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// The error codes of DESIGN.md §4.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    InvalidJson,
    InvalidRequest,
    UnknownWorkflowType,
    TooLarge,
    Conflict,
    NotFound,
    /// The caller's tenant is not granted what the request names (a pull secret
    /// reference).
    Forbidden,
    Unavailable,
    /// The server has more requests waiting than it takes: this one was not looked at,
    /// so sending it again (after `retry_after_ms`) is safe for every verb.
    Overloaded,
    Internal,
    /// A code this client does not know (a newer server's): read, never sent.
    #[serde(other)]
    Unknown,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidJson => "invalid_json",
            Self::InvalidRequest => "invalid_request",
            Self::UnknownWorkflowType => "unknown_workflow_type",
            Self::TooLarge => "too_large",
            Self::Conflict => "conflict",
            Self::NotFound => "not_found",
            Self::Forbidden => "forbidden",
            Self::Unavailable => "unavailable",
            Self::Overloaded => "overloaded",
            Self::Internal => "internal",
            Self::Unknown => "unknown",
        }
    }
}

/// An API error: a code and a message naming what was wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {message}", code.as_str())]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
    /// How long the server suggests waiting before sending the request again
    /// (`overloaded`).
    pub retry_after_ms: Option<u64>,
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            retry_after_ms: None,
        }
    }

    /// `overloaded`, with the pause the server suggests before a retry.
    pub fn overloaded(message: impl Into<String>, retry_after: std::time::Duration) -> Self {
        Self {
            retry_after_ms: Some(u64::try_from(retry_after.as_millis()).unwrap_or(u64::MAX)),
            ..Self::new(ErrorCode::Overloaded, message)
        }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidRequest, message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Internal, message)
    }

    /// `{"ok": false, "error": {"code", "message"}}`, and `retry_after_ms` when set.
    pub fn to_reply(&self) -> Value {
        let mut error = json!({"code": self.code.as_str(), "message": self.message});
        if let Some(pause) = self.retry_after_ms {
            error["retry_after_ms"] = json!(pause);
        }
        json!({"ok": false, "error": error})
    }
}

/// `{"ok": true, ...fields}`.
pub fn ok_reply(fields: Value) -> Value {
    let mut reply = serde_json::Map::new();
    reply.insert("ok".into(), Value::Bool(true));
    if let Value::Object(map) = fields {
        reply.extend(map);
    }
    Value::Object(reply)
}

/// A request body: at most `max_bytes`, JSON, an object — or the error that says which.
pub fn parse_body(
    body: &[u8],
    max_bytes: usize,
) -> Result<serde_json::Map<String, Value>, ApiError> {
    if body.len() > max_bytes {
        return Err(ApiError::new(
            ErrorCode::TooLarge,
            format!("the body is {} bytes; the limit is {max_bytes}", body.len()),
        ));
    }
    let value: Value = serde_json::from_slice(body).map_err(|error| {
        ApiError::new(
            ErrorCode::InvalidJson,
            format!("the body is not JSON: {error}"),
        )
    })?;
    match value {
        Value::Object(map) => Ok(map),
        _ => Err(ApiError::invalid("the body must be a JSON object")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_code_from_a_newer_server_still_reads() {
        let known: ErrorCode = serde_json::from_value(json!("forbidden")).unwrap();
        assert_eq!(known, ErrorCode::Forbidden);
        let newer: ErrorCode = serde_json::from_value(json!("rate_limited")).unwrap();
        assert_eq!(newer, ErrorCode::Unknown);
    }
}
