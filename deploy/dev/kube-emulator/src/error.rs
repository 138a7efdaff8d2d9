//! API errors as Kubernetes reports them: a `Status` object with `code`, `reason` and
//! `message`, which kube-rs and kubectl parse.

use serde_json::{json, Value};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason} ({code}): {message}")]
pub struct ApiError {
    pub code: u16,
    /// `NotFound`, `AlreadyExists`, `Conflict`, `Invalid`, `BadRequest`, ...
    pub reason: &'static str,
    pub message: String,
}

pub type Result<T, E = ApiError> = std::result::Result<T, E>;

impl ApiError {
    pub fn not_found(resource: &str, name: &str) -> Self {
        Self {
            code: 404,
            reason: "NotFound",
            message: format!("{resource} \"{name}\" not found"),
        }
    }

    pub fn already_exists(resource: &str, name: &str) -> Self {
        Self {
            code: 409,
            reason: "AlreadyExists",
            message: format!("{resource} \"{name}\" already exists"),
        }
    }

    pub fn conflict(message: impl Into<String>) -> Self {
        Self {
            code: 409,
            reason: "Conflict",
            message: message.into(),
        }
    }

    pub fn invalid(resource: &str, name: &str, problems: &[String]) -> Self {
        Self {
            code: 422,
            reason: "Invalid",
            message: format!("{resource} \"{name}\" is invalid: {}", problems.join(", ")),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self {
            code: 400,
            reason: "BadRequest",
            message: message.into(),
        }
    }

    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self {
            code: 405,
            reason: "MethodNotAllowed",
            message: message.into(),
        }
    }

    pub fn unsupported_media_type(message: impl Into<String>) -> Self {
        Self {
            code: 415,
            reason: "UnsupportedMediaType",
            message: message.into(),
        }
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self {
            code: 403,
            reason: "Forbidden",
            message: message.into(),
        }
    }

    pub fn gone(message: impl Into<String>) -> Self {
        Self {
            code: 410,
            reason: "Expired",
            message: message.into(),
        }
    }

    /// The `Status` body.
    pub fn to_status(&self) -> Value {
        json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        })
    }
}
