//! What the API server does to an object before it stores one. A HostedCluster or
//! NodePool: the CRD's structural schema (see [`crate::schema`]) prunes unknown fields,
//! or refuses them when the request asks for strict field validation, and refuses
//! invalid ones. A Secret: decoded, converted, defaulted and validated as kubernetes'
//! core API does it (see `secret`) — a pull secret must hold a `.dockerconfigjson`
//! that is a JSON object, and a Secret's type never changes.
//!
//! `fieldValidation` as a real API server reads it: `Strict` fails the request on an
//! unknown field; `Warn` — the default when a request does not say — and `Ignore` drop
//! it. Invalid values are refused in every mode, with 422 Invalid and a cause per field
//! ([`ApiError::invalid`]).

mod secret;

use std::collections::HashMap;

use serde_json::Value;

use crate::error::{ApiError, Result};
use crate::resources::{ResourceType, SECRETS};
use crate::schema::{self, FieldValidation};

/// The request's `fieldValidation`; an unsupported value is a bad request.
pub fn field_validation(params: &HashMap<String, String>) -> Result<FieldValidation> {
    FieldValidation::from_query(params.get("fieldValidation").map(String::as_str))
        .map_err(ApiError::bad_request)
}

/// Checks (and prunes, converts, defaults) `object` of type `rt` as the API server
/// would before a write: a create when `old` is `None`, else an update of `old`.
pub fn admit(
    rt: &ResourceType,
    directive: &FieldValidation,
    object: &mut Value,
    old: Option<&Value>,
) -> Result<()> {
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    if rt.kind == SECRETS.kind {
        let invalid = secret::admit(object, old)?;
        if !invalid.is_empty() {
            return Err(ApiError::invalid(rt, &name, &invalid));
        }
        return Ok(());
    }
    let checked = schema::check(rt.kind, object);
    if matches!(directive, FieldValidation::Strict) && !checked.unknown.is_empty() {
        let fields: Vec<String> = checked
            .unknown
            .iter()
            .map(|path| format!("unknown field \"{path}\""))
            .collect();
        return Err(ApiError::bad_request(format!(
            "strict decoding error: {}",
            fields.join(", ")
        )));
    }
    if !checked.invalid.is_empty() {
        return Err(ApiError::invalid(rt, &name, &checked.invalid));
    }
    Ok(())
}
