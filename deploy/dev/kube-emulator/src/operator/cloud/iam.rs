//! The control-plane-operator's AWS identity: the role in
//! `spec.platform.aws.rolesRef.controlPlaneOperatorARN`, which the real CPO assumes with
//! its web identity token. moto authorises nothing, so before each call the CPO would
//! make, the emulator evaluates the role's inline policies as stored in moto (IAM
//! ListRolePolicies and GetRolePolicy, read once per pass) the way IAM does: an explicit
//! Deny wins, then an Allow grants, and anything else is an implicit deny. A refusal is
//! AWS's answer to the CPO: `UnauthorizedOperation` from EC2, `AccessDenied` from
//! Route 53 (status 403, with IAM's wording). A role that cannot be assumed with the
//! CPO's web identity — it does not exist, or STS refuses the token for what `identity`
//! checks (the issuer's OIDC provider, discovery document and JWKS, the role's trust) —
//! fails every call before it is sent, as the Go SDK's web identity provider fails, with
//! the code the hypershift health check looks for (`WebIdentityErr`,
//! control-plane-operator/controllers/healthcheck/aws.go) and STS's answer.
//!
//! What is evaluated: `Effect`, `Action`/`NotAction` (wildcards `*` and `?`, actions
//! case-insensitive) and `Resource`/`NotResource` for the calls whose resource the
//! emulator names (the hosted zone of Route 53's record calls: a policy scoped to
//! `arn:aws:route53:::hostedzone/<id>` grants them on that zone only); EC2 calls are
//! evaluated as if on `*`-matching resources. `Condition` blocks are not evaluated
//! (a statement with one applies as if it held). Managed policies attached to the role
//! are not read.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::aws::{sdk, AwsError, Clients, Service};
use super::identity::{web_identity, Refusal};

/// The session name the emulator gives the CPO's assumed role in messages.
const SESSION: &str = "control-plane-operator";

#[derive(Debug, Clone, PartialEq, Eq)]
enum Patterns {
    /// `Action` / `Resource`: one of these.
    Any(Vec<String>),
    /// `NotAction` / `NotResource`: none of these.
    None(Vec<String>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Statement {
    allow: bool,
    actions: Patterns,
    resources: Patterns,
}

/// What the emulator learned of the role this pass.
#[derive(Debug, Clone)]
enum Identity {
    /// The role exists and can be assumed; its inline policies' statements.
    Role(Vec<Statement>),
    /// STS does not let the CPO assume the role (no such role, say): nothing can be
    /// done with it.
    Unassumable(Refusal),
    /// The role could not be read (moto unreachable, say): every call fails so.
    Unreadable(AwsError),
}

/// The CPO of one HostedCluster, with its role's permissions as read this pass.
#[derive(Debug, Clone)]
pub(super) struct Cpo {
    role_arn: String,
    account: String,
    role_name: String,
    identity: Arc<Identity>,
}

/// The roles read this pass, by ARN and the issuer of the CPO's token.
#[derive(Debug, Default)]
pub(super) struct Roles {
    read: HashMap<(String, String), Cpo>,
}

impl Roles {
    /// The CPO acting as `role_arn` with a token of `issuer` (read from AWS the first
    /// time this pass).
    pub(super) async fn cpo(&mut self, clients: &Clients, role_arn: &str, issuer: &str) -> Cpo {
        let key = (role_arn.to_owned(), issuer.to_owned());
        if let Some(cpo) = self.read.get(&key) {
            return cpo.clone();
        }
        let (account, role_name) = parse_role_arn(role_arn).unwrap_or_default();
        let identity = if role_name.is_empty() {
            Identity::Unassumable(Refusal::not_authorized())
        } else {
            read_role(clients, &account, &role_name, issuer).await
        };
        let cpo = Cpo {
            role_arn: role_arn.to_owned(),
            account,
            role_name,
            identity: Arc::new(identity),
        };
        self.read.insert(key, cpo.clone());
        cpo
    }
}

/// `(account, role name)` of `arn:aws:iam::<account>:role/<path/><name>`.
fn parse_role_arn(arn: &str) -> Option<(String, String)> {
    let parts: Vec<&str> = arn.splitn(6, ':').collect();
    match parts.as_slice() {
        ["arn", _, "iam", _, account, resource] => {
            let path = resource.strip_prefix("role/")?;
            let name = path.rsplit('/').next()?;
            (!name.is_empty()).then(|| ((*account).to_owned(), name.to_owned()))
        }
        _ => None,
    }
}

async fn read_role(clients: &Clients, account: &str, role_name: &str, issuer: &str) -> Identity {
    let mut names = Vec::new();
    let mut marker = None;
    loop {
        let listed = clients
            .iam
            .list_role_policies()
            .role_name(role_name)
            .set_marker(marker.take())
            .send()
            .await
            .map_err(|e| sdk(Service::Iam, "ListRolePolicies", e));
        match listed {
            Ok(page) => {
                names.extend(page.policy_names().iter().cloned());
                match page.marker() {
                    Some(next) if page.is_truncated() => marker = Some(next.to_owned()),
                    _ => break,
                }
            }
            Err(e) if e.code() == "NoSuchEntity" => {
                return Identity::Unassumable(Refusal::not_authorized())
            }
            Err(e) => return Identity::Unreadable(e),
        }
    }
    let mut statements = Vec::new();
    for name in names {
        let policy = clients
            .iam
            .get_role_policy()
            .role_name(role_name)
            .policy_name(&name)
            .send()
            .await
            .map_err(|e| sdk(Service::Iam, "GetRolePolicy", e));
        match policy {
            Ok(policy) => statements.extend(parse_document(policy.policy_document())),
            Err(e) if e.code() == "NoSuchEntity" => {}
            Err(e) => return Identity::Unreadable(e),
        }
    }
    match web_identity(clients, account, role_name, issuer).await {
        Ok(None) => Identity::Role(statements),
        Ok(Some(refusal)) => Identity::Unassumable(refusal),
        Err(e) => Identity::Unreadable(e),
    }
}

/// The statements of a policy document, as IAM returns it (URL-encoded JSON) or plain,
/// as JSON values (one statement or a list; nothing when it is not a policy).
pub(super) fn raw_statements(document: &str) -> Vec<Value> {
    let text = if document.trim_start().starts_with('{') {
        document.to_owned()
    } else {
        percent_encoding::percent_decode_str(document)
            .decode_utf8_lossy()
            .into_owned()
    };
    let Ok(value) = serde_json::from_str::<Value>(&text) else {
        return Vec::new();
    };
    match &value["Statement"] {
        Value::Array(list) => list.clone(),
        one @ Value::Object(_) => vec![one.clone()],
        _ => Vec::new(),
    }
}

/// A policy field that is one string or a list of them.
pub(super) fn strings(v: &Value) -> Vec<String> {
    match v {
        Value::String(s) => vec![s.clone()],
        Value::Array(list) => list
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    }
}

/// The statements of a policy document, parsed for the action check.
fn parse_document(document: &str) -> Vec<Statement> {
    let statements = raw_statements(document);
    let patterns = |statement: &Value, positive: &str, negative: &str| {
        if let Some(v) = statement.get(positive) {
            Patterns::Any(strings(v))
        } else if let Some(v) = statement.get(negative) {
            Patterns::None(strings(v))
        } else {
            Patterns::Any(Vec::new())
        }
    };
    statements
        .iter()
        .map(|s| Statement {
            allow: s["Effect"] == "Allow",
            actions: patterns(s, "Action", "NotAction"),
            resources: patterns(s, "Resource", "NotResource"),
        })
        .collect()
}

/// IAM's wildcard match: `*` any run of characters, `?` one.
pub(super) fn glob(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

impl Statement {
    fn applies(&self, action: &str, resource: Option<&str>) -> bool {
        let action_matches =
            |p: &String| glob(&p.to_ascii_lowercase(), &action.to_ascii_lowercase());
        let actions = match &self.actions {
            Patterns::Any(list) => list.iter().any(action_matches),
            Patterns::None(list) => !list.iter().any(action_matches),
        };
        let resources = match (resource, &self.resources) {
            (None, _) => true,
            (Some(r), Patterns::Any(list)) => list.iter().any(|p| glob(p, r)),
            (Some(r), Patterns::None(list)) => !list.iter().any(|p| glob(p, r)),
        };
        actions && resources
    }
}

/// Whether the statements allow `action` (on `resource`): `Err(true)` for an explicit
/// deny, `Err(false)` for an implicit one.
fn evaluate(statements: &[Statement], action: &str, resource: Option<&str>) -> Result<(), bool> {
    if statements
        .iter()
        .any(|s| !s.allow && s.applies(action, resource))
    {
        return Err(true);
    }
    if statements
        .iter()
        .any(|s| s.allow && s.applies(action, resource))
    {
        return Ok(());
    }
    Err(false)
}

/// A request id that stays the same for the same refusal, so a condition carrying it
/// does not change from one pass to the next.
fn request_id(parts: &[&str]) -> String {
    let digest = Sha256::digest(parts.join("\n").as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

impl Cpo {
    /// The role cannot be assumed: the CPO has no credentials at all.
    pub(super) fn cannot_assume(&self) -> bool {
        matches!(*self.identity, Identity::Unassumable(_))
    }

    /// The CPO's call: refused as AWS would refuse it when the role may not make it,
    /// else sent.
    pub(super) async fn call<T, E, F>(
        &self,
        service: Service,
        operation: &'static str,
        resource: Option<&str>,
        call: F,
    ) -> Result<T, AwsError>
    where
        F: Future<Output = Result<T, SdkError<E, aws_smithy_runtime_api::http::Response>>>,
        E: ProvideErrorMetadata + std::error::Error,
    {
        self.allow(service, operation, resource)?;
        call.await.map_err(|e| sdk(service, operation, e))
    }

    /// A create with tags (TagSpecifications) also needs `ec2:CreateTags`; AWS refuses
    /// the create itself when it is missing.
    pub(super) fn allow_tagging(&self, operation: &'static str) -> Result<(), AwsError> {
        self.allow(Service::Ec2, "CreateTags", None)
            .map_err(|e| AwsError { operation, ..e })
    }

    /// What AWS answers the CPO's `operation` on `service` (on `resource`, when the
    /// emulator names one): `Ok` when the role may do it, else the refusal.
    pub(super) fn allow(
        &self,
        service: Service,
        operation: &'static str,
        resource: Option<&str>,
    ) -> Result<(), AwsError> {
        let statements = match &*self.identity {
            Identity::Role(statements) => statements,
            Identity::Unreadable(error) => {
                return Err(AwsError {
                    service,
                    operation,
                    ..error.clone()
                })
            }
            Identity::Unassumable(refusal) => {
                return Err(AwsError {
                    service,
                    operation,
                    code: "WebIdentityErr".into(),
                    message: format!(
                        "failed to retrieve credentials, operation error STS: AssumeRoleWithWebIdentity, https response error StatusCode: {}, RequestID: {}, api error {}: {}",
                        refusal.status,
                        request_id(&["sts", &self.role_arn, refusal.code]),
                        refusal.code,
                        refusal.message
                    ),
                    answer: None,
                    identity: true,
                })
            }
        };
        let action = format!("{}:{operation}", service.prefix());
        let Err(explicit) = evaluate(statements, &action, resource) else {
            return Ok(());
        };
        let user = format!(
            "arn:aws:sts::{}:assumed-role/{}/{SESSION}",
            self.account, self.role_name
        );
        let on = resource
            .map(|r| format!(" on resource: {r}"))
            .unwrap_or_default();
        let why = if explicit {
            "with an explicit deny in an identity-based policy".to_owned()
        } else {
            format!("because no identity-based policy allows the {action} action")
        };
        let id = request_id(&[&self.role_arn, &action, resource.unwrap_or("*")]);
        Err(match service {
            Service::Ec2 => AwsError::api(
                service,
                operation,
                403,
                id,
                "UnauthorizedOperation",
                format!(
                    "You are not authorized to perform this operation. User: {user} is not authorized to perform: {action}{on} {why}"
                ),
            ),
            _ => AwsError::api(
                service,
                operation,
                403,
                id,
                "AccessDenied",
                format!("User: {user} is not authorized to perform: {action}{on} {why}"),
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpo(document: &str) -> Cpo {
        Cpo {
            role_arn: "arn:aws:iam::123456789012:role/demo-control-plane-operator".into(),
            account: "123456789012".into(),
            role_name: "demo-control-plane-operator".into(),
            identity: Arc::new(Identity::Role(parse_document(document))),
        }
    }

    #[test]
    fn role_arns_lose_their_path() {
        assert_eq!(
            parse_role_arn("arn:aws:iam::1:role/ops/x/demo-cpo"),
            Some(("1".into(), "demo-cpo".into()))
        );
        assert_eq!(parse_role_arn("arn:aws:iam::1:user/u"), None);
        assert_eq!(parse_role_arn("not-an-arn"), None);
    }

    #[test]
    fn wildcards_deny_and_resources_are_honoured() {
        let document = r#"{"Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Action": ["ec2:Describe*", "route53:Change*"],
             "Resource": "arn:aws:route53:::hostedzone/Z1"},
            {"Effect": "Allow", "Action": "ec2:*", "Resource": "*"},
            {"Effect": "Deny", "Action": "ec2:DeleteSecurityGroup", "Resource": "*"}]}"#;
        let cpo = cpo(document);
        assert!(cpo.allow(Service::Ec2, "CreateVpcEndpoint", None).is_ok());
        let zone = "arn:aws:route53:::hostedzone/Z1";
        assert!(cpo
            .allow(Service::Route53, "ChangeResourceRecordSets", Some(zone))
            .is_ok());
        let other = cpo
            .allow(
                Service::Route53,
                "ChangeResourceRecordSets",
                Some("arn:aws:route53:::hostedzone/Z2"),
            )
            .unwrap_err();
        assert_eq!(other.code(), "AccessDenied");
        assert!(other.go_error().starts_with(
            "operation error Route 53: ChangeResourceRecordSets, https response error StatusCode: 403, RequestID: "
        ));
        let denied = cpo
            .allow(Service::Ec2, "DeleteSecurityGroup", None)
            .unwrap_err();
        assert_eq!(denied.code(), "UnauthorizedOperation");
        assert!(
            denied.message.contains("explicit deny"),
            "{}",
            denied.message
        );
    }

    #[test]
    fn url_encoded_documents_are_read_and_a_missing_role_cannot_be_assumed() {
        let encoded = "%7B%22Statement%22%3A%7B%22Effect%22%3A%22Allow%22%2C%22Action%22%3A%22ec2%3ADescribeVpcs%22%2C%22Resource%22%3A%22%2A%22%7D%7D";
        let cpo = cpo(encoded);
        assert!(cpo.allow(Service::Ec2, "DescribeVpcs", None).is_ok());
        assert_eq!(
            cpo.allow(Service::Ec2, "CreateSecurityGroup", None)
                .unwrap_err()
                .code(),
            "UnauthorizedOperation"
        );
        let missing = Cpo {
            identity: Arc::new(Identity::Unassumable(Refusal::not_authorized())),
            ..cpo
        };
        let error = missing
            .allow(Service::Ec2, "DescribeVpcs", None)
            .unwrap_err();
        assert_eq!(error.code(), "WebIdentityErr");
        assert!(error
            .go_error()
            .starts_with("operation error EC2: DescribeVpcs, get identity: get credentials:"));
    }

    #[test]
    fn glob_matches_like_iam() {
        assert!(glob("ec2:*", "ec2:createsecuritygroup"));
        assert!(glob("route53:change*", "route53:changeresourcerecordsets"));
        assert!(glob("ec2:describe?pcs", "ec2:describevpcs"));
        assert!(!glob("ec2:describe*", "ec2:createvpcendpoint"));
        assert!(glob("*", ""));
    }
}
