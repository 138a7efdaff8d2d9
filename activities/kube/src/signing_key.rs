//! The service-account signing key in the form the HyperShift operator reads.
//!
//! The operator parses `<name>-sa-token-issuer-key`'s `key` as a PKCS#1 RSA private key
//! (`BEGIN RSA PRIVATE KEY`); a PKCS#8 key (`BEGIN PRIVATE KEY`, what the key generator
//! writes, and what older histories hold sealed) leaves the HostedCluster with
//! `ValidConfiguration=False`. The Secret writer therefore turns whatever it unseals
//! into PKCS#1: a PKCS#8 RSA key is unwrapped (its `privateKey` octet string *is* the
//! PKCS#1 structure), a PKCS#1 key is checked and rewritten as it is.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;

/// `rsaEncryption`, 1.2.840.113549.1.1.1, DER-encoded.
const RSA_ENCRYPTION_OID: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];

/// Why a key cannot be written for the operator. Says what is wrong with the
/// structure, never anything of the key itself.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyFormatError {
    #[error("not a PEM private key ({0})")]
    Pem(&'static str),
    #[error("the PEM block is {0:?}; expected an RSA private key")]
    Label(String),
    #[error("not DER: {0}")]
    Der(&'static str),
    #[error("a PKCS#8 key of another algorithm than RSA")]
    NotRsa,
}

/// The key as PKCS#1 PEM (`RSA PRIVATE KEY`).
///
/// # Errors
/// The text is not one PEM block holding an RSA private key in PKCS#1 or PKCS#8 form.
pub fn pkcs1_pem(pem: &str) -> Result<String, KeyFormatError> {
    let (label, der) = decode_pem(pem)?;
    let pkcs1 = match label.as_str() {
        "RSA PRIVATE KEY" => der,
        "PRIVATE KEY" => unwrap_pkcs8(&der)?,
        other => return Err(KeyFormatError::Label(other.to_owned())),
    };
    check_pkcs1(&pkcs1)?;
    Ok(encode_pem("RSA PRIVATE KEY", &pkcs1))
}

fn decode_pem(text: &str) -> Result<(String, Vec<u8>), KeyFormatError> {
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let begin = lines.next().ok_or(KeyFormatError::Pem("empty"))?;
    let label = begin
        .strip_prefix("-----BEGIN ")
        .and_then(|rest| rest.strip_suffix("-----"))
        .ok_or(KeyFormatError::Pem("no BEGIN line"))?
        .to_owned();
    let end = format!("-----END {label}-----");
    let mut body = String::new();
    let mut ended = false;
    for line in lines {
        if line == end {
            ended = true;
            break;
        }
        body.push_str(line);
    }
    if !ended {
        return Err(KeyFormatError::Pem("no matching END line"));
    }
    let der = STANDARD
        .decode(body)
        .map_err(|_| KeyFormatError::Pem("the body is not base64"))?;
    Ok((label, der))
}

/// A PEM block: base64 in lines of 64 between the BEGIN and END lines.
fn encode_pem(label: &str, der: &[u8]) -> String {
    let body = STANDARD.encode(der);
    let mut text = format!("-----BEGIN {label}-----\n");
    for line in body.as_bytes().chunks(64) {
        text.push_str(&String::from_utf8_lossy(line));
        text.push('\n');
    }
    text.push_str(&format!("-----END {label}-----\n"));
    text
}

/// One DER element: its tag, its content, and what follows it.
fn element(der: &[u8]) -> Result<(u8, &[u8], &[u8]), KeyFormatError> {
    let (&tag, rest) = der.split_first().ok_or(KeyFormatError::Der("truncated"))?;
    let (&first, rest) = rest.split_first().ok_or(KeyFormatError::Der("truncated"))?;
    let (length, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let count = usize::from(first & 0x7f);
        if count == 0 || count > 4 || rest.len() < count {
            return Err(KeyFormatError::Der("bad length"));
        }
        let length = rest[..count]
            .iter()
            .fold(0usize, |n, b| (n << 8) | usize::from(*b));
        (length, &rest[count..])
    };
    if rest.len() < length {
        return Err(KeyFormatError::Der("truncated"));
    }
    Ok((tag, &rest[..length], &rest[length..]))
}

const SEQUENCE: u8 = 0x30;
const INTEGER: u8 = 0x02;
const OCTET_STRING: u8 = 0x04;
const OBJECT_ID: u8 = 0x06;

fn expect(der: &[u8], tag: u8) -> Result<(&[u8], &[u8]), KeyFormatError> {
    let (found, content, rest) = element(der)?;
    if found != tag {
        return Err(KeyFormatError::Der("unexpected element"));
    }
    Ok((content, rest))
}

/// PrivateKeyInfo ::= SEQUENCE { version, AlgorithmIdentifier, privateKey OCTET STRING, .. }
fn unwrap_pkcs8(der: &[u8]) -> Result<Vec<u8>, KeyFormatError> {
    let (info, _) = expect(der, SEQUENCE)?;
    let (_version, rest) = expect(info, INTEGER)?;
    let (algorithm, rest) = expect(rest, SEQUENCE)?;
    let (oid, _) = expect(algorithm, OBJECT_ID)?;
    if oid != RSA_ENCRYPTION_OID {
        return Err(KeyFormatError::NotRsa);
    }
    let (private_key, _) = expect(rest, OCTET_STRING)?;
    Ok(private_key.to_vec())
}

/// RSAPrivateKey ::= SEQUENCE { version 0, n, e, d, p, q, dP, dQ, qInv } — nine integers.
fn check_pkcs1(der: &[u8]) -> Result<(), KeyFormatError> {
    let (key, trailing) = expect(der, SEQUENCE)?;
    if !trailing.is_empty() {
        return Err(KeyFormatError::Der("data after the key"));
    }
    let mut rest = key;
    for _ in 0..9 {
        let (_, next) = expect(rest, INTEGER)?;
        rest = next;
    }
    if !rest.is_empty() {
        return Err(KeyFormatError::Der("not a two-prime RSA key"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A PKCS#8 RSA key is three wrappers around a PKCS#1 one; build one by hand from a
    /// small (not secure, structurally valid) PKCS#1 body.
    fn pkcs1_der() -> Vec<u8> {
        let mut body = Vec::new();
        for value in [0u8, 0x0b, 3, 7, 5, 3, 1, 1, 2] {
            body.extend([INTEGER, 1, value]);
        }
        let mut der = vec![SEQUENCE, body.len() as u8];
        der.extend(body);
        der
    }

    fn pkcs8_der(pkcs1: &[u8], oid: &[u8]) -> Vec<u8> {
        let mut algorithm = vec![OBJECT_ID, oid.len() as u8];
        algorithm.extend(oid);
        algorithm.extend([0x05, 0x00]);
        let mut info = vec![INTEGER, 1, 0, SEQUENCE, algorithm.len() as u8];
        info.extend(algorithm);
        info.extend([OCTET_STRING, pkcs1.len() as u8]);
        info.extend(pkcs1);
        let mut der = vec![SEQUENCE, info.len() as u8];
        der.extend(info);
        der
    }

    #[test]
    fn a_pkcs8_rsa_key_becomes_the_pkcs1_key_it_wraps() {
        let pkcs8 = encode_pem("PRIVATE KEY", &pkcs8_der(&pkcs1_der(), RSA_ENCRYPTION_OID));
        let converted = pkcs1_pem(&pkcs8).unwrap();
        assert_eq!(converted, encode_pem("RSA PRIVATE KEY", &pkcs1_der()));
        assert!(converted.starts_with("-----BEGIN RSA PRIVATE KEY-----\n"));
        assert_eq!(pkcs1_pem(&converted).unwrap(), converted, "PKCS#1 stays");
    }

    #[test]
    fn anything_else_is_refused_without_echoing_the_key() {
        let ec = encode_pem("PRIVATE KEY", &pkcs8_der(&pkcs1_der(), &[0x2a, 0x86, 0x48]));
        assert_eq!(pkcs1_pem(&ec), Err(KeyFormatError::NotRsa));
        let public = encode_pem("PUBLIC KEY", &[1, 2, 3]);
        assert!(matches!(pkcs1_pem(&public), Err(KeyFormatError::Label(l)) if l == "PUBLIC KEY"));
        assert!(pkcs1_pem("hunter2").is_err());
        let cut = encode_pem("RSA PRIVATE KEY", &pkcs1_der()[..10]);
        let error = pkcs1_pem(&cut).unwrap_err().to_string();
        assert!(
            !error.contains("MIIC") && !error.contains("hunter2"),
            "{error}"
        );
    }
}
