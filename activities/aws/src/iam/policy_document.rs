//! IAM returns policy documents URL-encoded; comparing one with the document we want
//! means decoding it and comparing JSON values, not text.

use serde_json::Value;

/// The document as JSON, whether IAM sent it URL-encoded (AWS) or plain (moto).
pub fn decode(document: &str) -> Option<Value> {
    let text = if document.trim_start().starts_with('{') {
        document.to_owned()
    } else {
        percent_encoding::percent_decode_str(document)
            .decode_utf8()
            .ok()?
            .into_owned()
    };
    serde_json::from_str(&text).ok()
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
