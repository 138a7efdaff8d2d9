//! What the API server does to a Secret before it stores one, as kubernetes'
//! pkg/apis/core does it: the v1 decoding (each `data` value is base64, else 400
//! BadRequest `Secret in version "v1" cannot be handled as a Secret: illegal base64
//! data at input byte N`), the conversion (`stringData` written over `data`, never
//! stored), the default (`type: Opaque`), and validation's `ValidateSecret` and
//! `ValidateSecretUpdate` for what the emulator's clients meet:
//!
//! - `kubernetes.io/dockerconfigjson` needs `data[.dockerconfigjson]`
//!   (`data[.dockerconfigjson]: Required value`) holding what `json.Unmarshal` takes into
//!   a `map[string]interface{}` (else `data[.dockerconfigjson]: Invalid value:
//!   "<secret contents redacted>": <the JSON error>`); `kubernetes.io/dockercfg` the
//!   same of `.dockercfg`;
//! - on update the `type` is immutable (`type: Invalid value: "Opaque": field is
//!   immutable`), and a Secret marked `immutable: true` keeps that mark and its data
//!   (`Forbidden: field is immutable when `immutable` is set`).
//!
//! Not modelled: the checks of the other types (service-account token, basic-auth,
//! ssh-auth, TLS), the data key format and the 1 MiB limit.

use std::collections::BTreeMap;

use base64::Engine;
use serde_json::{json, Map, Value};

use crate::error::{ApiError, Result};

/// `core.SecretTypeDockercfg` and its `core.DockerConfigKey`.
const DOCKERCFG: (&str, &str) = ("kubernetes.io/dockercfg", ".dockercfg");
/// `core.SecretTypeDockerConfigJson` and its `core.DockerConfigJsonKey`.
const DOCKERCONFIGJSON: (&str, &str) = ("kubernetes.io/dockerconfigjson", ".dockerconfigjson");
/// What a field error shows instead of a Secret's data.
const REDACTED: &str = "<secret contents redacted>";
const IMMUTABLE_SET: &str = "field is immutable when `immutable` is set";

/// The decoded data of a Secret, by key.
type Data = BTreeMap<String, Vec<u8>>;

fn undecodable(detail: &str) -> ApiError {
    ApiError::bad_request(format!(
        "Secret in version \"v1\" cannot be handled as a Secret: {detail}"
    ))
}

/// Decodes, converts and defaults `object` in place (its `data` in canonical base64,
/// `stringData` folded in, `type` set); the field errors of `ValidateSecret` — or of
/// `ValidateSecretUpdate` against `old` — in Kubernetes' style.
///
/// Errors: 400 BadRequest when a `data` value is not base64 or a value is not a string.
pub(super) fn admit(object: &mut Value, old: Option<&Value>) -> Result<Vec<String>> {
    if !object.is_object() {
        return Err(undecodable(&format!(
            "json: cannot unmarshal {} into Go value of type v1.Secret",
            json_kind(object)
        )));
    }
    let mut data = decode(object.get("data"))?;
    match object.as_object_mut().and_then(|o| o.remove("stringData")) {
        None | Some(Value::Null) => {}
        Some(Value::Object(strings)) => {
            for (key, value) in strings {
                let Value::String(text) = value else {
                    return Err(type_error(&value, "stringData", "string"));
                };
                data.insert(key, text.into_bytes());
            }
        }
        Some(other) => return Err(type_error(&other, "stringData", "map[string]string")),
    }
    if object.get("data").is_some_and(|d| !d.is_null()) || !data.is_empty() {
        let encoded: Map<String, Value> = data
            .iter()
            .map(|(key, bytes)| {
                let text = base64::engine::general_purpose::STANDARD.encode(bytes);
                (key.clone(), Value::String(text))
            })
            .collect();
        object["data"] = Value::Object(encoded);
    }
    let kind = secret_type(object).to_owned();
    object["type"] = json!(kind);

    let mut errors = Vec::new();
    if let Some(old) = old {
        let old_kind = secret_type(old);
        if kind != old_kind {
            errors.push(format!(
                "type: Invalid value: {}: field is immutable",
                Value::String(kind.clone())
            ));
        }
        if old.get("immutable") == Some(&json!(true)) {
            if object.get("immutable") != Some(&json!(true)) {
                errors.push(format!("immutable: Forbidden: {IMMUTABLE_SET}"));
            }
            // A stored Secret's data decodes: the emulator wrote it.
            if decode(old.get("data")).unwrap_or_default() != data {
                errors.push(format!("data: Forbidden: {IMMUTABLE_SET}"));
            }
        }
    }
    errors.extend(validate(&kind, &data));
    Ok(errors)
}

/// `SetDefaults_Secret`: a Secret without a type is `Opaque`.
fn secret_type(object: &Value) -> &str {
    object
        .get("type")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
        .unwrap_or("Opaque")
}

/// `data` as the v1 decoder reads it: base64 strings (a `null` value is empty).
fn decode(data: Option<&Value>) -> Result<Data> {
    let entries = match data {
        None | Some(Value::Null) => return Ok(Data::new()),
        Some(Value::Object(entries)) => entries,
        Some(other) => return Err(type_error(other, "data", "map[string][]uint8")),
    };
    let mut decoded = Data::new();
    for (key, value) in entries {
        let bytes = match value {
            Value::Null => Vec::new(),
            Value::String(text) => from_base64(text)
                .map_err(|at| undecodable(&format!("illegal base64 data at input byte {at}")))?,
            other => return Err(type_error(other, "data", "[]uint8")),
        };
        decoded.insert(key.clone(), bytes);
    }
    Ok(decoded)
}

/// A `data` value as Go's `StdEncoding` takes it (padding required, line breaks
/// skipped, the last symbol's unused bits not checked), or the offset of the first byte
/// it refuses. The offset counts the line breaks, as Go's does.
fn from_base64(text: &str) -> std::result::Result<Vec<u8>, usize> {
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    const GO_STD: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        GeneralPurposeConfig::new()
            .with_decode_allow_trailing_bits(true)
            .with_decode_padding_mode(DecodePaddingMode::RequireCanonical),
    );
    // Offsets in the text without line breaks, mapped back to the text's.
    let kept: Vec<usize> = text
        .bytes()
        .enumerate()
        .filter(|(_, b)| *b != b'\n' && *b != b'\r')
        .map(|(at, _)| at)
        .collect();
    let compact: Vec<u8> = kept.iter().map(|&at| text.as_bytes()[at]).collect();
    GO_STD.decode(&compact).map_err(|error| {
        let at = match error {
            base64::DecodeError::InvalidByte(at, _)
            | base64::DecodeError::InvalidLastSymbol(at, _) => at,
            // A quantum cut short: Go names where it starts.
            base64::DecodeError::InvalidLength(len) => len - len % 4,
            base64::DecodeError::InvalidPadding => compact.len(),
        };
        kept.get(at).copied().unwrap_or(text.len())
    })
}

/// Whether `json.Unmarshal` takes `document` into a `map[string]interface{}`: a JSON
/// object, or `null`. The errors for a document cut short and for another kind of
/// value read as Go's; a syntax error names the offending character and where it is
/// (Go's own words for it are not reproduced).
fn unmarshal_into_map(document: &[u8]) -> std::result::Result<(), String> {
    match serde_json::from_slice::<Value>(document) {
        Ok(Value::Object(_) | Value::Null) => Ok(()),
        Ok(other) => Err(format!(
            "json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
            json_kind(&other)
        )),
        Err(error) if error.is_eof() => Err("unexpected end of JSON input".into()),
        Err(error) => {
            let at = offset(document, error.line(), error.column());
            let found = document.get(at).map_or_else(String::new, |b| {
                format!("'{}' ", char::from(*b).escape_default())
            });
            Err(format!("invalid character {found}at offset {}", at + 1))
        }
    }
}

/// The byte offset of serde_json's 1-based line and column.
fn offset(document: &[u8], line: usize, column: usize) -> usize {
    let line_start: usize = document
        .split(|b| *b == b'\n')
        .take(line.saturating_sub(1))
        .map(|l| l.len() + 1)
        .sum();
    (line_start + column).saturating_sub(1)
}

/// The decoder's `UnmarshalTypeError` for a value of the wrong kind in a field.
fn type_error(value: &Value, field: &str, go_type: &str) -> ApiError {
    let kind = json_kind(value);
    undecodable(&format!(
        "json: cannot unmarshal {kind} into Go struct field Secret.{field} of type {go_type}"
    ))
}

/// How `encoding/json` names a JSON value's kind in an `UnmarshalTypeError`.
fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// `ValidateSecret`'s checks of the docker-config types.
fn validate(kind: &str, data: &Data) -> Vec<String> {
    let Some((_, key)) = [DOCKERCFG, DOCKERCONFIGJSON]
        .into_iter()
        .find(|(name, _)| *name == kind)
    else {
        return Vec::new();
    };
    let field = format!("data[{key}]");
    match data.get(key) {
        None => vec![format!("{field}: Required value")],
        Some(document) => match unmarshal_into_map(document) {
            Ok(()) => Vec::new(),
            Err(error) => vec![format!(
                "{field}: Invalid value: {}: {error}",
                Value::String(REDACTED.into())
            )],
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(text: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(text)
    }

    #[test]
    fn a_dockerconfigjson_secret_needs_its_key_and_a_json_object() {
        let mut good = json!({"type": "kubernetes.io/dockerconfigjson",
                              "data": {".dockerconfigjson": b64(r#"{"auths":{}}"#)}});
        assert_eq!(admit(&mut good, None), Ok(vec![]));
        let mut keyless = json!({"type": "kubernetes.io/dockerconfigjson", "data": {}});
        assert_eq!(
            admit(&mut keyless, None),
            Ok(vec!["data[.dockerconfigjson]: Required value".to_owned()])
        );
        let mut text = json!({"type": "kubernetes.io/dockercfg",
                              "data": {".dockercfg": b64("user:password")}});
        assert_eq!(
            admit(&mut text, None),
            Ok(vec![
                "data[.dockercfg]: Invalid value: \"<secret contents redacted>\": invalid character 'u' at offset 1"
                    .to_owned()
            ])
        );
        // Other types are not looked into.
        let mut opaque = json!({"data": {".dockerconfigjson": b64("not json")}});
        assert_eq!(admit(&mut opaque, None), Ok(vec![]));
        assert_eq!(opaque["type"], "Opaque");
    }

    #[test]
    fn string_data_is_folded_into_data_in_canonical_base64() {
        let mut secret = json!({"data": {"a": "YW\nJj", "b": "eA=="}, "stringData": {"b": "y"}});
        assert_eq!(admit(&mut secret, None), Ok(vec![]));
        assert_eq!(
            secret,
            json!({"data": {"a": "YWJj", "b": "eQ=="}, "type": "Opaque"})
        );
        let mut empty = json!({"metadata": {}});
        assert_eq!(admit(&mut empty, None), Ok(vec![]));
        assert!(empty.get("data").is_none(), "{empty}");
        let mut bad = json!({"data": {"a": 1}});
        assert_eq!(
            admit(&mut bad, None).unwrap_err().message,
            "Secret in version \"v1\" cannot be handled as a Secret: json: cannot unmarshal number into Go struct field Secret.data of type []uint8"
        );
    }

    #[test]
    fn an_update_keeps_the_type_and_an_immutable_secrets_data() {
        let old = json!({"type": "Opaque", "data": {"a": "eA=="}});
        let mut retyped = json!({"type": "kubernetes.io/tls", "data": {"a": "eA=="}});
        assert_eq!(
            admit(&mut retyped, Some(&old)),
            Ok(vec![
                "type: Invalid value: \"kubernetes.io/tls\": field is immutable".to_owned()
            ])
        );
        // No type is Opaque, on both sides.
        let mut untyped = json!({"data": {"a": "eA=="}});
        assert_eq!(admit(&mut untyped, Some(&json!({}))), Ok(vec![]));

        let frozen = json!({"type": "Opaque", "immutable": true, "data": {"a": "eA=="}});
        let mut same = frozen.clone();
        assert_eq!(admit(&mut same, Some(&frozen)), Ok(vec![]));
        let mut thawed = json!({"type": "Opaque", "data": {"a": "eQ=="}});
        assert_eq!(
            admit(&mut thawed, Some(&frozen)),
            Ok(vec![
                format!("immutable: Forbidden: {IMMUTABLE_SET}"),
                format!("data: Forbidden: {IMMUTABLE_SET}"),
            ])
        );
    }
}
