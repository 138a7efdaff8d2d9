//! Bytes as lowercase hexadecimal text: digests, hashes and keys. The `hex` crate's
//! `encode` builds its string a `char` at a time through an iterator; a replay
//! computes a digest for every command it matches, so this is on the hot path.

const DIGITS: &[u8; 16] = b"0123456789abcdef";

/// `bytes` as lowercase hex, two digits a byte (what `hex::encode` returns).
pub fn lower_hex(bytes: &[u8]) -> String {
    let mut digits = Vec::with_capacity(bytes.len() * 2);
    for byte in bytes {
        digits.push(DIGITS[usize::from(byte >> 4)]);
        digits.push(DIGITS[usize::from(byte & 0x0f)]);
    }
    String::from_utf8(digits).expect("hex digits are ASCII")
}

#[cfg(test)]
mod tests {
    use super::lower_hex;

    #[test]
    fn matches_the_hex_crate() {
        let bytes: Vec<u8> = (0..=255).collect();
        assert_eq!(lower_hex(&bytes), hex::encode(&bytes));
        assert_eq!(lower_hex(&[]), "");
    }
}
