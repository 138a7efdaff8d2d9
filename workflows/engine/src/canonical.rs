//! The canonical JSON form: the exact bytes that are hashed into the chain and stored.
//!
//! It is written by this module, not by `serde_json`'s serializer, so no dependency
//! feature (`preserve_order`, `arbitrary_precision`) can change it:
//! - object keys sorted by their UTF-8 bytes; no whitespace anywhere;
//! - strings escape only `"`, `\` and control characters (`\b \f \n \r \t`, else `\u00xx`);
//!   everything else is literal UTF-8;
//! - integers in plain decimal; other numbers in the shortest form that round-trips
//!   (`ryu`).
//!
//! Parsing canonical bytes and writing them again gives the same bytes.

use std::io::Write as _;

use serde::Serialize;
use serde_json::{Number, Value};

/// Canonical bytes of a JSON value.
pub fn to_vec(value: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(128);
    write_value(&mut out, value);
    out
}

/// Canonical bytes of an object given as its entries, each key once: the values are
/// written where they are, not copied into an object first.
pub fn object_to_vec(entries: &mut [(&str, &Value)]) -> Vec<u8> {
    debug_assert!(
        entries
            .iter()
            .enumerate()
            .all(|(i, (key, _))| entries[..i].iter().all(|(other, _)| other != key)),
        "a key given twice"
    );
    let mut out = Vec::with_capacity(128);
    write_object(&mut out, entries);
    out
}

/// Canonical bytes of any serializable value.
pub fn to_vec_of<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, serde_json::Error> {
    Ok(to_vec(&serde_json::to_value(value)?))
}

/// True when `bytes` are exactly the canonical form of the JSON they hold.
pub fn is_canonical(bytes: &[u8]) -> bool {
    serde_json::from_slice::<Value>(bytes).is_ok_and(|value| to_vec(&value) == bytes)
}

fn write_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(number) => write_number(out, number),
        Value::String(text) => write_string(out, text),
        Value::Array(items) => {
            out.push(b'[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(b',');
                }
                write_value(out, item);
            }
            out.push(b']');
        }
        Value::Object(map) => {
            let mut entries: Vec<(&str, &Value)> =
                map.iter().map(|(key, item)| (key.as_str(), item)).collect();
            write_object(out, &mut entries);
        }
    }
}

fn write_object(out: &mut Vec<u8>, entries: &mut [(&str, &Value)]) {
    entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    out.push(b'{');
    for (index, (key, item)) in entries.iter().enumerate() {
        if index > 0 {
            out.push(b',');
        }
        write_string(out, key);
        out.push(b':');
        write_value(out, item);
    }
    out.push(b'}');
}

fn write_number(out: &mut Vec<u8>, number: &Number) {
    if let Some(unsigned) = number.as_u64() {
        let _ = write!(out, "{unsigned}");
    } else if let Some(signed) = number.as_i64() {
        let _ = write!(out, "{signed}");
    } else if let Some(float) = number.as_f64() {
        // serde_json's Value cannot hold NaN or infinities, so ryu's output is valid JSON.
        let mut buffer = ryu::Buffer::new();
        out.extend_from_slice(buffer.format_finite(float).as_bytes());
    } else {
        // Only reachable with `arbitrary_precision` and a number outside f64:
        // keep its decimal text, which is still deterministic.
        out.extend_from_slice(number.to_string().as_bytes());
    }
}

fn write_string(out: &mut Vec<u8>, text: &str) {
    out.push(b'"');
    // Every byte to escape is ASCII, and no byte of a multi-byte UTF-8 sequence is:
    // the runs between them are copied whole.
    let bytes = text.as_bytes();
    let mut run = 0;
    for (at, &byte) in bytes.iter().enumerate() {
        let escaped: &[u8] = match byte {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            0x08 => b"\\b",
            0x0c => b"\\f",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x00..=0x1f => b"",
            _ => continue,
        };
        out.extend_from_slice(&bytes[run..at]);
        if escaped.is_empty() {
            out.extend_from_slice(format!("\\u{byte:04x}").as_bytes());
        } else {
            out.extend_from_slice(escaped);
        }
        run = at + 1;
    }
    out.extend_from_slice(&bytes[run..]);
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_are_sorted_at_every_depth_and_whitespace_is_gone() {
        let value = json!({"b": 1, "a": {"z": [3, {"y": true, "x": null}], "c": "s"}});
        assert_eq!(
            String::from_utf8(to_vec(&value)).unwrap(),
            r#"{"a":{"c":"s","z":[3,{"x":null,"y":true}]},"b":1}"#
        );
    }

    #[test]
    fn strings_escape_only_what_json_requires() {
        let value = json!("quote\" back\\ nl\n tab\t bell\u{07} é ☃ 🚀");
        assert_eq!(
            String::from_utf8(to_vec(&value)).unwrap(),
            "\"quote\\\" back\\\\ nl\\n tab\\t bell\\u0007 é ☃ 🚀\""
        );
    }

    /// Every ASCII character alone and between multi-byte ones is written as the JSON
    /// escape each needs (the same set and forms as serde_json's writer), and what is
    /// written parses back to the same text.
    #[test]
    fn every_ascii_character_is_escaped_as_json_requires() {
        for byte in 0u8..0x80 {
            let ch = char::from(byte);
            for text in [ch.to_string(), format!("é{ch}☃{ch}{ch}🚀")] {
                let written = to_vec(&Value::String(text.clone()));
                assert_eq!(
                    written,
                    serde_json::to_vec(&text).unwrap(),
                    "byte {byte:#04x}"
                );
                let parsed: String = serde_json::from_slice(&written).unwrap();
                assert_eq!(parsed, text, "byte {byte:#04x}");
            }
        }
    }

    #[test]
    fn numbers_are_stable() {
        let value: Value =
            serde_json::from_str("[0, -7, 18446744073709551615, 1.5, 1.0, 1e300, -0.25]").unwrap();
        assert_eq!(
            String::from_utf8(to_vec(&value)).unwrap(),
            "[0,-7,18446744073709551615,1.5,1.0,1e300,-0.25]"
        );
    }

    #[test]
    fn output_is_a_fixed_point() {
        let value = json!({"k": [1, 2.5, "x", {"n": -1}], "e": {}, "a": []});
        let once = to_vec(&value);
        let twice = to_vec(&serde_json::from_slice(&once).unwrap());
        assert_eq!(once, twice);
        assert!(is_canonical(&once));
        assert!(!is_canonical(br#"{"b":1,"a":2}"#));
        assert!(!is_canonical(br#"{"a": 2}"#));
    }
}
