//! The hypershift-operator's configuration checks that decide `ValidConfiguration`
//! (hostedcluster_controller.go: `validateConfigAndClusterCapabilities`), for the parts
//! an AWS HostedCluster meets: the service-account signing key must be a PKCS#1 RSA key
//! (support/certs `PemToPrivateKey` → `x509.ParsePKCS1PrivateKey`), and the services
//! must be published as `validateAWSConfig` allows. Messages are the operator's, joined
//! as Kubernetes aggregates them (one error alone, several as `[a, b]`).

use base64::Engine;
use serde_json::Value;

use crate::resources::SECRETS;
use crate::store::Store;

/// The data key of the signing-key Secret.
const SIGNING_KEY_DATA: &str = "key";

/// `Ok` when the operator accepts the HostedCluster's configuration, else the message
/// of its `ValidConfiguration=False` (reason `InvalidConfiguration`).
pub(super) fn validate(
    store: &Store,
    namespace: &str,
    hosted_cluster: &Value,
) -> Result<(), String> {
    let mut errors = Vec::new();
    if let Err(error) = signing_key(store, namespace, hosted_cluster) {
        errors.push(format!("invalid service account signing key: {error}"));
    }
    errors.extend(aws_publishing(hosted_cluster));
    match errors.len() {
        0 => Ok(()),
        1 => Err(errors.remove(0)),
        _ => Err(format!("[{}]", errors.join(", "))),
    }
}

fn signing_key(store: &Store, namespace: &str, hosted_cluster: &Value) -> Result<(), String> {
    let Some(name) = hosted_cluster
        .pointer("/spec/serviceAccountSigningKey/name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
    else {
        return Ok(());
    };
    let issuer = hosted_cluster
        .pointer("/spec/issuerURL")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if issuer.is_empty() {
        return Err(
            "the IssuerURL must be set when specifying a service account signing key".into(),
        );
    }
    let secret = store.get(&SECRETS, Some(namespace), name).map_err(|_| {
        format!(
            "failed to get hostedcluster ServiceAccountSigningKey secret {name}: secrets \"{name}\" not found"
        )
    })?;
    let encoded = secret
        .pointer(&format!("/data/{SIGNING_KEY_DATA}"))
        .and_then(Value::as_str)
        .ok_or_else(|| {
            format!("cannot find service account key \"{SIGNING_KEY_DATA}\" in secret {name}")
        })?;
    let pem = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .unwrap_or_default();
    parse_pkcs1_pem(&pem).map_err(|e| format!("cannot decode private key in secret {name}: {e}"))
}

/// What `PemToPrivateKey` does: the first PEM block (whatever its label), parsed as a
/// PKCS#1 RSA private key, with Go's error messages.
fn parse_pkcs1_pem(data: &[u8]) -> Result<(), String> {
    let text = String::from_utf8_lossy(data);
    let Some(der) = first_pem_block(&text) else {
        return Err("could not find a PEM block in the private key".into());
    };
    if is_pkcs1(&der) {
        return Ok(());
    }
    if is_pkcs8(&der) {
        return Err(
            "x509: failed to parse private key (use ParsePKCS8PrivateKey instead for this key format)"
                .into(),
        );
    }
    Err("x509: failed to parse private key".into())
}

fn first_pem_block(text: &str) -> Option<Vec<u8>> {
    let start = text.find("-----BEGIN ")?;
    let rest = &text[start..];
    let header_end = rest.find('\n')?;
    let label = rest[..header_end]
        .trim()
        .strip_prefix("-----BEGIN ")?
        .strip_suffix("-----")?;
    let body = &rest[header_end + 1..];
    let end = body.find(&format!("-----END {label}-----"))?;
    let base64: String = body[..end].chars().filter(|c| !c.is_whitespace()).collect();
    base64::engine::general_purpose::STANDARD
        .decode(base64)
        .ok()
}

/// The DER elements of a constructed value's content: (tag, content) pairs, or `None`
/// when the bytes are not a well-formed sequence of elements.
fn elements(mut der: &[u8]) -> Option<Vec<(u8, &[u8])>> {
    let mut out = Vec::new();
    while !der.is_empty() {
        let tag = *der.first()?;
        let first = *der.get(1)?;
        let (length, header) = if first & 0x80 == 0 {
            (usize::from(first), 2)
        } else {
            let count = usize::from(first & 0x7f);
            if count == 0 || count > 4 {
                return None;
            }
            let bytes = der.get(2..2 + count)?;
            (
                bytes.iter().fold(0usize, |n, b| (n << 8) | usize::from(*b)),
                2 + count,
            )
        };
        let content = der.get(header..header + length)?;
        out.push((tag, content));
        der = &der[header + length..];
    }
    Some(out)
}

/// One SEQUENCE and nothing after it; its elements.
fn sequence(der: &[u8]) -> Option<Vec<(u8, &[u8])>> {
    match elements(der)?.as_slice() {
        [(0x30, content)] => elements(content),
        _ => None,
    }
}

/// RSAPrivateKey: a SEQUENCE of exactly nine INTEGERs (two-prime, version 0).
fn is_pkcs1(der: &[u8]) -> bool {
    sequence(der).is_some_and(|items| items.len() == 9 && items.iter().all(|(t, _)| *t == 0x02))
}

/// PrivateKeyInfo: INTEGER version, SEQUENCE algorithm, OCTET STRING key, ...
fn is_pkcs8(der: &[u8]) -> bool {
    sequence(der).is_some_and(|items| {
        items.len() >= 3 && items[0].0 == 0x02 && items[1].0 == 0x30 && items[2].0 == 0x04
    })
}

/// `validateAWSConfig`: Konnectivity, OAuthServer and Ignition by Route; the API server
/// by Route only with a hostname, else by LoadBalancer (Private also allows Route).
fn aws_publishing(hosted_cluster: &Value) -> Vec<String> {
    if hosted_cluster
        .pointer("/spec/platform/type")
        .and_then(Value::as_str)
        != Some("AWS")
    {
        return Vec::new();
    }
    let Some(aws) = hosted_cluster.pointer("/spec/platform/aws") else {
        return vec!["aws cluster needs .spec.platform.aws to be filled".into()];
    };
    let strategy = |service: &str| {
        hosted_cluster
            .pointer("/spec/services")
            .and_then(Value::as_array)
            .and_then(|services| services.iter().find(|s| s["service"] == service))
            .map(|s| s["servicePublishingStrategy"].clone())
    };
    let kind = |strategy: &Value| {
        strategy
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let mut errors = Vec::new();
    for service in ["Konnectivity", "OAuthServer", "Ignition"] {
        match strategy(service) {
            None => errors.push(format!("service type {service} not found")),
            Some(s) if kind(&s) != "Route" => errors.push(format!(
                "service type {service} with publishing strategy {} is not supported, use Route",
                kind(&s)
            )),
            Some(_) => {}
        }
    }
    let Some(api_server) = strategy("APIServer") else {
        errors.push("service type APIServer not found".into());
        return errors;
    };
    let dedicated_hostname = api_server
        .pointer("/route/hostname")
        .and_then(Value::as_str)
        .is_some_and(|h| !h.is_empty());
    let api_kind = kind(&api_server);
    if api_kind == "Route" && !dedicated_hostname {
        errors.push(
            "if serviceType is 'APIServer' and publishing strategy is 'Route', then hostname must be set"
                .into(),
        );
        return errors;
    }
    let private = aws.get("endpointAccess").and_then(Value::as_str) == Some("Private");
    if private {
        if api_kind != "Route" && api_kind != "LoadBalancer" {
            errors.push(format!(
                "service type APIServer with publishing strategy {api_kind} is not supported, use Route"
            ));
        }
    } else if !dedicated_hostname && api_kind != "LoadBalancer" {
        errors.push(format!(
            "service type APIServer with publishing strategy {api_kind} is not supported, use Route or LoadBalancer"
        ));
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cluster(access: &str, api_server: Value) -> Value {
        json!({"spec": {"platform": {"type": "AWS", "aws": {"endpointAccess": access}},
        "services": [
            {"service": "APIServer", "servicePublishingStrategy": api_server},
            {"service": "OAuthServer", "servicePublishingStrategy": {"type": "Route"}},
            {"service": "Konnectivity", "servicePublishingStrategy": {"type": "Route"}},
            {"service": "Ignition", "servicePublishingStrategy": {"type": "Route"}},
        ]}})
    }

    #[test]
    fn the_api_server_by_load_balancer_passes_in_every_access_mode() {
        for access in ["Public", "PublicAndPrivate", "Private"] {
            assert!(aws_publishing(&cluster(access, json!({"type": "LoadBalancer"}))).is_empty());
        }
    }

    #[test]
    fn a_route_without_hostname_is_refused_even_for_a_private_cluster() {
        let errors = aws_publishing(&cluster("Private", json!({"type": "Route"})));
        assert_eq!(
            errors,
            ["if serviceType is 'APIServer' and publishing strategy is 'Route', then hostname must be set"]
        );
        let named = json!({"type": "Route", "route": {"hostname": "api.example.com"}});
        assert!(aws_publishing(&cluster("Private", named)).is_empty());
    }

    #[test]
    fn other_services_must_be_routes_and_present() {
        let mut hc = cluster("Public", json!({"type": "NodePort"}));
        hc["spec"]["services"][1]["servicePublishingStrategy"] = json!({"type": "LoadBalancer"});
        hc["spec"]["services"].as_array_mut().unwrap().remove(3);
        assert_eq!(
            aws_publishing(&hc),
            [
                "service type OAuthServer with publishing strategy LoadBalancer is not supported, use Route",
                "service type Ignition not found",
                "service type APIServer with publishing strategy NodePort is not supported, use Route or LoadBalancer",
            ]
        );
    }

    fn pem(label: &str, der: &[u8]) -> Vec<u8> {
        let body = base64::engine::general_purpose::STANDARD.encode(der);
        format!("-----BEGIN {label}-----\n{body}\n-----END {label}-----\n").into_bytes()
    }

    #[test]
    fn only_a_pkcs1_key_parses_with_gos_messages_otherwise() {
        let mut ints = Vec::new();
        for v in [0u8, 11, 3, 7, 5, 3, 1, 1, 2] {
            ints.extend([0x02, 1, v]);
        }
        let mut pkcs1 = vec![0x30, ints.len() as u8];
        pkcs1.extend(&ints);
        assert_eq!(parse_pkcs1_pem(&pem("RSA PRIVATE KEY", &pkcs1)), Ok(()));
        let mut info = vec![0x02, 1, 0, 0x30, 2, 0x05, 0x00, 0x04, pkcs1.len() as u8];
        info.extend(&pkcs1);
        let mut pkcs8 = vec![0x30, info.len() as u8];
        pkcs8.extend(info);
        assert_eq!(
            parse_pkcs1_pem(&pem("PRIVATE KEY", &pkcs8)),
            Err("x509: failed to parse private key (use ParsePKCS8PrivateKey instead for this key format)".into())
        );
        assert_eq!(
            parse_pkcs1_pem(b"hello"),
            Err("could not find a PEM block in the private key".into())
        );
        assert_eq!(
            parse_pkcs1_pem(&pem("RSA PRIVATE KEY", &[0x30, 0x01])),
            Err("x509: failed to parse private key".into())
        );
    }
}
