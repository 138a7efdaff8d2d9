//! The control-plane-operator's web identity, and its health check.
//!
//! The health check (control-plane-operator/controllers/healthcheck/aws.go:
//! `awsHealthCheckIdentityProvider`, run by the CPO's health-check updater and bubbled
//! up to the HostedCluster by its controller, hostedcluster_controller.go) reports
//! `ValidAWSIdentityProvider`: Unknown `StatusUnknown` "Cannot validate AWS identity
//! provider while KubeAPIServer is not available" until the API server is up; then it
//! calls `ec2:DescribeVpcEndpoints` as the CPO: True `AsExpected` "All is well" when
//! that works, False `InvalidIdentityProvider` with the error code only
//! (`WebIdentityErr`) when the CPO's web identity cannot be turned into credentials,
//! Unknown `AWSError` with the code for another AWS refusal, Unknown `StatusUnknown`
//! with the error for no answer at all. The HostedCluster controller's own, before the
//! control plane reports it (no HostedControlPlane yet, or a blocked one), is Unknown
//! `StatusUnknown` with no message. Nothing waits for it to become Available; the CPO
//! makes the default security group only once it is True
//! (hostedcontrolplane_controller.go: `reconcileDefaultSecurityGroup`).
//!
//! What STS checks when the CPO assumes its role with its service-account token
//! (AssumeRoleWithWebIdentity), as far as the emulator can see it in its AWS: the role
//! exists (`iam`); and, for an issuer served from S3 (`spec.issuerURL`
//! `https://<bucket>.s3[.<region>].amazonaws.com/<path>` or the path-style
//! `https://s3[.<region>].amazonaws.com/<bucket>/<path>`), that IAM has an OIDC
//! provider for it (else `InvalidIdentityToken` "No OpenIDConnect provider found in
//! your account for <issuer>"), that the discovery document
//! `<path>/.well-known/openid-configuration` is in the bucket and names a `jwks_uri`
//! whose object (when it is in S3 too) exists (else `InvalidIdentityToken` "Couldn't
//! retrieve verification key from your identity provider, …"), and that the role's
//! trust policy allows `sts:AssumeRoleWithWebIdentity` to that provider (else
//! `AccessDenied` "Not authorized to perform sts:AssumeRoleWithWebIdentity"). Not
//! checked: an issuer elsewhere (the CRD's default `https://kubernetes.default.svc`
//! included: nothing to look at), the trust policy's `Condition`s, the JWKS's keys
//! against the signing key, the objects' public access.

use serde_json::Value;

use super::aws::{sdk, unless_not_found, AwsError, Clients, Service};
use super::conditions::{condition, ALL_IS_WELL, STATUS_UNKNOWN, VALID_IDENTITY_PROVIDER};
use super::iam::{glob, raw_statements, strings, Cpo};
use super::spec::Cluster;

/// `hyperv1.InvalidIdentityProvider`.
const INVALID_IDENTITY_PROVIDER: &str = "InvalidIdentityProvider";
/// `hyperv1.AWSErrorReason`.
const AWS_ERROR: &str = "AWSError";
/// The health check's message while the API server is down.
pub const KUBE_API_SERVER_UNAVAILABLE: &str =
    "Cannot validate AWS identity provider while KubeAPIServer is not available";

/// STS's answer to AssumeRoleWithWebIdentity, when it refuses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Refusal {
    pub(super) status: u16,
    pub(super) code: &'static str,
    pub(super) message: String,
}

impl Refusal {
    /// The role does not exist or does not trust the provider.
    pub(super) fn not_authorized() -> Self {
        Self {
            status: 403,
            code: "AccessDenied",
            message: "Not authorized to perform sts:AssumeRoleWithWebIdentity".into(),
        }
    }

    fn no_provider(issuer: &str) -> Self {
        Self {
            status: 400,
            code: "InvalidIdentityToken",
            message: format!("No OpenIDConnect provider found in your account for {issuer}"),
        }
    }

    fn no_verification_key() -> Self {
        Self {
            status: 400,
            code: "InvalidIdentityToken",
            message: "Couldn't retrieve verification key from your identity provider,  please reference AssumeRoleWithWebIdentity documentation for requirements".into(),
        }
    }
}

/// An S3 object named by an `https://` URL: `(bucket, key)`, the key without a leading
/// or trailing `/`.
fn s3_location(url: &str) -> Option<(String, String)> {
    let rest = url.strip_prefix("https://")?;
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let path = path.trim_matches('/');
    let service = host.strip_suffix(".amazonaws.com")?;
    let regional = |s: &str| s == "s3" || s.starts_with("s3.") || s.starts_with("s3-");
    if regional(service) {
        // Path style: the bucket is the first segment.
        let (bucket, key) = path.split_once('/').unwrap_or((path, ""));
        return (!bucket.is_empty()).then(|| (bucket.to_owned(), key.to_owned()));
    }
    // Virtual-hosted style: `<bucket>.s3[.<region>|-<region>]`.
    let at = service.rfind(".s3")?;
    let (bucket, after) = (&service[..at], &service[at + 1..]);
    (regional(after) && !bucket.is_empty()).then(|| (bucket.to_owned(), path.to_owned()))
}

/// The issuer as IAM names its provider: without the scheme and a trailing `/`.
fn provider_name(issuer: &str) -> &str {
    issuer
        .strip_prefix("https://")
        .unwrap_or(issuer)
        .trim_end_matches('/')
}

/// The key of `name` under the issuer's path.
fn under(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_owned()
    } else {
        format!("{prefix}/{name}")
    }
}

/// Whether a trust policy (as IAM returns it: URL-encoded JSON, or plain) lets
/// `provider_arn` assume the role with a web identity: an Allow for
/// `sts:AssumeRoleWithWebIdentity` to that federated principal (or to `*`) and no Deny.
/// `Condition` blocks are not evaluated.
fn trusts(document: &str, provider_arn: &str) -> bool {
    let statements = raw_statements(document);
    let applies = |s: &Value| {
        let action = "sts:assumerolewithwebidentity";
        let actions = match (s.get("Action"), s.get("NotAction")) {
            (Some(list), _) => strings(list)
                .iter()
                .any(|p| glob(&p.to_ascii_lowercase(), action)),
            (None, Some(list)) => !strings(list)
                .iter()
                .any(|p| glob(&p.to_ascii_lowercase(), action)),
            (None, None) => false,
        };
        let principal = match s.get("Principal") {
            Some(Value::String(any)) => any == "*",
            Some(principal) => strings(&principal["Federated"])
                .iter()
                .any(|p| p == provider_arn || p == "*"),
            None => false,
        };
        actions && principal
    };
    let effect = |s: &Value, wanted: &str| s["Effect"].as_str() == Some(wanted);
    !statements.iter().any(|s| effect(s, "Deny") && applies(s))
        && statements.iter().any(|s| effect(s, "Allow") && applies(s))
}

/// Whether STS would let the CPO assume `role_name` of `account` with a token of
/// `issuer`: `Ok(None)` when it would (or when the issuer is not one the emulator can
/// look at), `Ok(Some(refusal))` when it would not, `Err` when moto could not be asked.
pub(super) async fn web_identity(
    clients: &Clients,
    account: &str,
    role_name: &str,
    issuer: &str,
) -> Result<Option<Refusal>, AwsError> {
    let Some((bucket, prefix)) = s3_location(issuer) else {
        return Ok(None);
    };
    let provider_arn = format!(
        "arn:aws:iam::{account}:oidc-provider/{}",
        provider_name(issuer)
    );
    let provider = clients
        .iam
        .get_open_id_connect_provider()
        .open_id_connect_provider_arn(&provider_arn)
        .send()
        .await
        .map_err(|e| sdk(Service::Iam, "GetOpenIDConnectProvider", e));
    if unless_not_found(provider)?.is_none() {
        return Ok(Some(Refusal::no_provider(issuer.trim_end_matches('/'))));
    }
    let discovery = clients
        .s3
        .get_object()
        .bucket(&bucket)
        .key(under(&prefix, ".well-known/openid-configuration"))
        .send()
        .await
        .map_err(|e| sdk(Service::S3, "GetObject", e));
    let Some(discovery) = unless_not_found(discovery)? else {
        return Ok(Some(Refusal::no_verification_key()));
    };
    let body = discovery.body.collect().await.map_err(|e| AwsError {
        service: Service::S3,
        operation: "GetObject",
        code: "Unknown".into(),
        message: e.to_string(),
        answer: None,
        identity: false,
    })?;
    let jwks_uri = serde_json::from_slice::<Value>(&body.into_bytes())
        .ok()
        .and_then(|document| document["jwks_uri"].as_str().map(str::to_owned));
    let Some(jwks_uri) = jwks_uri else {
        return Ok(Some(Refusal::no_verification_key()));
    };
    if let Some((jwks_bucket, jwks_key)) = s3_location(&jwks_uri) {
        let jwks = clients
            .s3
            .head_object()
            .bucket(&jwks_bucket)
            .key(&jwks_key)
            .send()
            .await
            .map_err(|e| sdk(Service::S3, "HeadObject", e));
        if unless_not_found(jwks)?.is_none() {
            return Ok(Some(Refusal::no_verification_key()));
        }
    }
    let role = clients
        .iam
        .get_role()
        .role_name(role_name)
        .send()
        .await
        .map_err(|e| sdk(Service::Iam, "GetRole", e));
    let trusted = unless_not_found(role)?
        .and_then(|found| found.role)
        .and_then(|role| role.assume_role_policy_document)
        .is_some_and(|document| trusts(&document, &provider_arn));
    Ok((!trusted).then(Refusal::not_authorized))
}

/// `awsHealthCheckIdentityProvider`: the `ValidAWSIdentityProvider` condition.
pub(super) async fn health_check(clients: &Clients, cpo: &Cpo, cluster: &Cluster) -> Value {
    let generation = cluster.generation;
    if !cluster.is("KubeAPIServerAvailable", "True") {
        return condition(
            VALID_IDENTITY_PROVIDER,
            "Unknown",
            STATUS_UNKNOWN,
            KUBE_API_SERVER_UNAVAILABLE,
            generation,
        );
    }
    let described = cpo
        .call(
            Service::Ec2,
            "DescribeVpcEndpoints",
            None,
            clients.ec2.describe_vpc_endpoints().send(),
        )
        .await;
    match described {
        Ok(_) => condition(
            VALID_IDENTITY_PROVIDER,
            "True",
            "AsExpected",
            ALL_IS_WELL,
            generation,
        ),
        // The code only: the message would carry request ids.
        Err(e) if e.code() == "WebIdentityErr" => condition(
            VALID_IDENTITY_PROVIDER,
            "False",
            INVALID_IDENTITY_PROVIDER,
            e.code(),
            generation,
        ),
        Err(e) if e.answer.is_some() => condition(
            VALID_IDENTITY_PROVIDER,
            "Unknown",
            AWS_ERROR,
            e.code(),
            generation,
        ),
        Err(e) => condition(
            VALID_IDENTITY_PROVIDER,
            "Unknown",
            STATUS_UNKNOWN,
            &e.go_error(),
            generation,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s3_issuers_are_recognised_in_both_styles() {
        assert_eq!(
            s3_location("https://hcpflow-oidc.s3.us-east-1.amazonaws.com/demo-x7k2p"),
            Some(("hcpflow-oidc".into(), "demo-x7k2p".into()))
        );
        assert_eq!(
            s3_location("https://my.bucket.s3.amazonaws.com/a/b/"),
            Some(("my.bucket".into(), "a/b".into()))
        );
        assert_eq!(
            s3_location("https://b.s3-eu-west-1.amazonaws.com"),
            Some(("b".into(), String::new()))
        );
        assert_eq!(
            s3_location("https://s3.us-east-1.amazonaws.com/b/demo/openid/v1/jwks"),
            Some(("b".into(), "demo/openid/v1/jwks".into()))
        );
        assert_eq!(s3_location("https://kubernetes.default.svc"), None);
        assert_eq!(
            s3_location("http://b.s3.us-east-1.amazonaws.com/x"),
            None,
            "STS only reads https issuers"
        );
        assert_eq!(
            s3_location("https://oidc.eks.us-east-1.amazonaws.com/id/X"),
            None
        );
        assert_eq!(
            provider_name("https://b.s3.us-east-1.amazonaws.com/demo/"),
            "b.s3.us-east-1.amazonaws.com/demo"
        );
        assert_eq!(under("", "x"), "x");
        assert_eq!(under("demo", "x"), "demo/x");
    }

    #[test]
    fn a_trust_policy_must_name_the_provider_for_web_identities() {
        let arn = "arn:aws:iam::123456789012:oidc-provider/b.s3.us-east-1.amazonaws.com/demo";
        let trust = |principal: Value, action: &str, effect: &str| {
            serde_json::json!({"Version": "2012-10-17", "Statement": [{"Effect": effect,
                "Principal": principal, "Action": action,
                "Condition": {"StringEquals": {"x:sub": "y"}}}]})
            .to_string()
        };
        let federated = serde_json::json!({"Federated": arn});
        assert!(trusts(
            &trust(federated.clone(), "sts:AssumeRoleWithWebIdentity", "Allow"),
            arn
        ));
        assert!(trusts(
            &percent_encoding::utf8_percent_encode(
                &trust(federated.clone(), "sts:*", "Allow"),
                percent_encoding::NON_ALPHANUMERIC
            )
            .to_string(),
            arn
        ));
        assert!(!trusts(
            &trust(
                serde_json::json!({"Federated": "arn:aws:iam::123456789012:oidc-provider/other"}),
                "sts:AssumeRoleWithWebIdentity",
                "Allow"
            ),
            arn
        ));
        assert!(!trusts(
            &trust(federated.clone(), "sts:AssumeRole", "Allow"),
            arn
        ));
        let both = serde_json::json!({"Statement": [
            {"Effect": "Allow", "Principal": {"Federated": arn}, "Action": "sts:AssumeRoleWithWebIdentity"},
            {"Effect": "Deny", "Principal": "*", "Action": "sts:*"}]});
        assert!(!trusts(&both.to_string(), arn));
        assert!(!trusts("not json", arn));
    }
}
