//! API errors as Kubernetes reports them: a `Status` object with `code`, `reason` and
//! `message` — and, for `Invalid`, `details` naming the object and each field error —
//! which kube-rs and kubectl parse.

use serde_json::{json, Map, Value};

use crate::resources::ResourceType;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason} ({code}): {message}")]
pub struct ApiError {
    pub code: u16,
    /// `NotFound`, `AlreadyExists`, `Conflict`, `Invalid`, `BadRequest`, ...
    pub reason: &'static str,
    pub message: String,
    /// The Status' `details`, when the error has them.
    pub details: Option<Value>,
}

pub type Result<T, E = ApiError> = std::result::Result<T, E>;

impl ApiError {
    pub fn not_found(resource: &str, name: &str) -> Self {
        Self {
            code: 404,
            reason: "NotFound",
            message: format!("{resource} \"{name}\" not found"),
            details: None,
        }
    }

    pub fn already_exists(resource: &str, name: &str) -> Self {
        Self {
            code: 409,
            reason: "AlreadyExists",
            message: format!("{resource} \"{name}\" already exists"),
            details: None,
        }
    }

    pub fn conflict(message: impl Into<String>) -> Self {
        Self {
            code: 409,
            reason: "Conflict",
            message: message.into(),
            details: None,
        }
    }

    /// What apimachinery's `NewInvalid` makes of field errors written as Kubernetes
    /// prints them (`spec.release.image: Required value`, `data[.dockerconfigjson]:
    /// Invalid value: ...`): the message `<Kind>[.<group>] "<name>" is invalid: <errors>`
    /// (one error as it is, several as `[a, b]`, repeats once), and in `details` the
    /// group, kind and name and one cause per error — its field, the message after the
    /// field, and the field-error type its words name (`FieldValueRequired`, ...).
    pub fn invalid(rt: &ResourceType, name: &str, problems: &[String]) -> Self {
        let mut unique: Vec<&String> = Vec::new();
        for problem in problems {
            if !unique.contains(&problem) {
                unique.push(problem);
            }
        }
        let aggregate = match unique.as_slice() {
            [one] => (*one).clone(),
            many => format!(
                "[{}]",
                many.iter()
                    .map(|p| p.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        let causes: Vec<Value> = problems
            .iter()
            .map(|problem| {
                let (field, body) = problem.split_once(": ").unwrap_or(("", problem));
                json!({"reason": cause_type(body), "message": body, "field": field})
            })
            .collect();
        let mut details = Map::new();
        details.insert("name".into(), json!(name));
        if !rt.group.is_empty() {
            details.insert("group".into(), json!(rt.group));
        }
        details.insert("kind".into(), json!(rt.kind));
        details.insert("causes".into(), Value::Array(causes));
        Self {
            code: 422,
            reason: "Invalid",
            message: format!("{} \"{name}\" is invalid: {aggregate}", rt.group_kind()),
            details: Some(Value::Object(details)),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self {
            code: 400,
            reason: "BadRequest",
            message: message.into(),
            details: None,
        }
    }

    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self {
            code: 405,
            reason: "MethodNotAllowed",
            message: message.into(),
            details: None,
        }
    }

    pub fn unsupported_media_type(message: impl Into<String>) -> Self {
        Self {
            code: 415,
            reason: "UnsupportedMediaType",
            message: message.into(),
            details: None,
        }
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self {
            code: 403,
            reason: "Forbidden",
            message: message.into(),
            details: None,
        }
    }

    pub fn gone(message: impl Into<String>) -> Self {
        Self {
            code: 410,
            reason: "Expired",
            message: message.into(),
            details: None,
        }
    }

    /// The `Status` body.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(details) = &self.details {
            status["details"] = details.clone();
        }
        status
    }
}

/// The `CauseType` of a field error from the words its message starts with
/// (`field.ErrorType`'s `String`); one the emulator words itself counts as invalid.
fn cause_type(body: &str) -> &'static str {
    const TYPES: [(&str, &str); 11] = [
        ("Required value", "FieldValueRequired"),
        ("Invalid value", "FieldValueInvalid"),
        ("Unsupported value", "FieldValueNotSupported"),
        ("Duplicate value", "FieldValueDuplicate"),
        ("Not found", "FieldValueNotFound"),
        ("Forbidden", "FieldValueForbidden"),
        ("Too long", "FieldValueTooLong"),
        ("Too short", "FieldValueTooShort"),
        ("Too many", "FieldValueTooMany"),
        ("Too few", "FieldValueTooFew"),
        ("Internal error", "InternalError"),
    ];
    TYPES
        .iter()
        .find(|(words, _)| body.starts_with(words))
        .map_or("FieldValueInvalid", |(_, kind)| kind)
}
