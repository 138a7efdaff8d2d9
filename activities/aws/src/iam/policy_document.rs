//! IAM returns policy documents URL-encoded; comparing one with the document we want
//! means decoding it and comparing JSON values, not text.

use serde_json::Value;

/// The document as JSON, whether IAM sent it URL-encoded (AWS) or plain (moto).
pub fn decode(document: &str) -> Option<Value> {
    let text = if document.trim_start().starts_with('{') {
        document.to_owned()
    } else {
        percent_decode(document)?
    };
    serde_json::from_str(&text).ok()
}

fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = text.get(i + 1..i + 3)?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            byte => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoded_and_plain_documents_decode_to_the_same_value() {
        let plain = r#"{"Version":"2012-10-17","Statement":[]}"#;
        let encoded = "%7B%22Version%22%3A%222012-10-17%22%2C%22Statement%22%3A%5B%5D%7D";
        assert_eq!(decode(plain), decode(encoded));
        assert!(decode(plain).is_some());
        assert_eq!(decode("%zz"), None);
    }
}
