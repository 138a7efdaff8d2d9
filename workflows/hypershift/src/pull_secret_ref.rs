//! A pull secret by reference: a Secret on the management cluster or an AWS Secrets
//! Manager secret, named in the create's input and read only by the activity that writes
//! the cluster's pull secret, so the value never crosses NATS and never enters a history,
//! not even sealed. Which references a tenant may name is the server's configuration
//! ([`SecretRefPolicy`]), checked at intake and again where the reference is read.

use std::fmt;
use std::str::FromStr;

use hcpflow_engine::TenantId;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::admission::{matches, reserved_namespace};
use crate::create::TYPE as CREATE;
use crate::input::{is_dns_label, is_dns_subdomain};

/// The key of a `kubernetes.io/dockerconfigjson` Secret's document.
pub const DOCKERCONFIGJSON_KEY: &str = ".dockerconfigjson";

/// Exactly one of the two sources is given (the input's validation says so otherwise).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PullSecretRef {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes: Option<KubernetesSecretRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aws_secrets_manager: Option<SecretsManagerRef>,
}

/// A key of a Secret on the management cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KubernetesSecretRef {
    pub namespace: String,
    pub name: String,
    #[serde(default = "dockerconfigjson_key")]
    pub key: String,
}

/// A Secrets Manager secret; its `SecretString` is the `.dockerconfigjson` document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretsManagerRef {
    pub arn: String,
}

fn dockerconfigjson_key() -> String {
    DOCKERCONFIGJSON_KEY.to_owned()
}

/// The one source a valid reference names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretSource<'a> {
    Kubernetes(&'a KubernetesSecretRef),
    SecretsManager(&'a SecretsManagerRef),
}

impl PullSecretRef {
    /// The source, when exactly one is given.
    pub fn source(&self) -> Option<SecretSource<'_>> {
        match (&self.kubernetes, &self.aws_secrets_manager) {
            (Some(secret), None) => Some(SecretSource::Kubernetes(secret)),
            (None, Some(secret)) => Some(SecretSource::SecretsManager(secret)),
            _ => None,
        }
    }

    /// Every problem with the reference, each naming its field under `at`.
    pub fn problems(&self, at: &str) -> Vec<String> {
        let Some(source) = self.source() else {
            return vec![format!(
                "{at}: name exactly one of kubernetes {{namespace, name, key}} and aws_secrets_manager {{arn}}"
            )];
        };
        let mut problems = Vec::new();
        match source {
            SecretSource::Kubernetes(secret) => {
                if !is_dns_label(&secret.namespace, 63) {
                    problems.push(format!(
                        "{at}.kubernetes.namespace: {:?} is not a namespace name",
                        secret.namespace
                    ));
                }
                if !is_dns_subdomain(&secret.name) {
                    problems.push(format!(
                        "{at}.kubernetes.name: {:?} is not a Secret name",
                        secret.name
                    ));
                }
                if !is_secret_key(&secret.key) {
                    problems.push(format!(
                        "{at}.kubernetes.key: {:?} is not a Secret key (letters, digits, '-', '_', '.')",
                        secret.key
                    ));
                }
            }
            SecretSource::SecretsManager(secret) => {
                if let Err(problem) = SecretsManagerArn::parse(&secret.arn) {
                    problems.push(format!("{at}.aws_secrets_manager.arn: {problem}"));
                }
            }
        }
        problems
    }
}

impl fmt::Display for SecretSource<'_> {
    /// Where the value is, for messages: never the value.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SecretSource::Kubernetes(secret) => write!(
                f,
                "Secret {}/{} key {}",
                secret.namespace, secret.name, secret.key
            ),
            SecretSource::SecretsManager(secret) => write!(f, "secret {}", secret.arn),
        }
    }
}

/// The parts of `arn:<partition>:secretsmanager:<region>:<account>:secret:<name>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretsManagerArn<'a> {
    pub region: &'a str,
    pub account: &'a str,
    pub name: &'a str,
}

impl<'a> SecretsManagerArn<'a> {
    pub fn parse(arn: &'a str) -> Result<Self, String> {
        let parts: Vec<&str> = arn.splitn(7, ':').collect();
        match parts[..] {
            ["arn", partition, "secretsmanager", region, account, "secret", name]
                if !partition.is_empty()
                    && is_region(region)
                    && account.len() == 12
                    && account.bytes().all(|b| b.is_ascii_digit())
                    && !name.is_empty() =>
            {
                Ok(Self {
                    region,
                    account,
                    name,
                })
            }
            _ => Err(format!(
                "{arn:?} is not a Secrets Manager secret ARN (arn:aws:secretsmanager:<region>:<account>:secret:<name>)"
            )),
        }
    }
}

/// `us-east-1`, `eu-central-2`, `us-gov-west-1`: lowercase words, then a number. A typo
/// here would otherwise be a DNS failure retried until the policy gives up.
pub(crate) fn is_region(region: &str) -> bool {
    let mut words: Vec<&str> = region.split('-').collect();
    let number = words.pop().unwrap_or_default();
    words.len() >= 2
        && words
            .iter()
            .all(|w| !w.is_empty() && w.bytes().all(|b| b.is_ascii_lowercase()))
        && !number.is_empty()
        && number.bytes().all(|b| b.is_ascii_digit())
}

fn is_secret_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= 253
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// What one tenant may name: every Secret of a management-cluster namespace, or the
/// Secrets Manager secrets whose ARN matches (exact, or a prefix ending in `*`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "pattern")]
pub enum AllowedSource {
    KubernetesNamespace(String),
    SecretsManagerArn(String),
}

/// One grant: `tenant=kubernetes:<namespace>` or `tenant=arn:...:secret:<name or prefix*>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SecretRefGrant {
    pub tenant: String,
    pub source: AllowedSource,
}

impl FromStr for SecretRefGrant {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let usage = "a secret-reference grant is TENANT=kubernetes:NAMESPACE or TENANT=arn:aws:secretsmanager:REGION:ACCOUNT:secret:NAME (a trailing /* allows a path)";
        let (tenant, source) = text
            .split_once('=')
            .ok_or_else(|| format!("{text:?}: {usage}"))?;
        let tenant = TenantId::new(tenant.trim()).map_err(|_| {
            format!(
                "{text:?}: {:?} is not a tenant name; {usage}",
                tenant.trim()
            )
        })?;
        let source = source.trim();
        let source = if let Some(namespace) = source.strip_prefix("kubernetes:") {
            if !is_dns_label(namespace, 63) {
                return Err(format!(
                    "{text:?}: {namespace:?} is not a namespace; {usage}"
                ));
            }
            if reserved_namespace(namespace) {
                return Err(format!(
                    "{text:?}: {namespace:?} belongs to the management cluster itself; keep pull secrets in a namespace of their own"
                ));
            }
            AllowedSource::KubernetesNamespace(namespace.to_owned())
        } else if source.starts_with("arn:") {
            // A prefix is a path (`team-a/*`): AWS appends a random `-XXXXXX` to every
            // secret's name, so `team-a*` would also match `team-ab…` and `team-aX…`.
            if source.ends_with('*') && !source.ends_with("/*") {
                return Err(format!(
                    "{text:?}: a Secrets Manager prefix ends in \"/*\" (a path of secret names, such as secret:team-a/*)"
                ));
            }
            SecretsManagerArn::parse(source.trim_end_matches('*'))
                .map_err(|problem| format!("{text:?}: {problem}"))?;
            AllowedSource::SecretsManagerArn(source.to_owned())
        } else {
            return Err(format!("{text:?}: {usage}"));
        };
        Ok(Self {
            tenant: tenant.as_str().to_owned(),
            source,
        })
    }
}

/// Which tenant may name which references. Empty (the default): no references at all.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct SecretRefPolicy {
    pub grants: Vec<SecretRefGrant>,
}

impl SecretRefPolicy {
    pub fn new(grants: Vec<SecretRefGrant>) -> Self {
        Self { grants }
    }

    /// `Ok` when `tenant` may read `reference`; else why not, naming the source only.
    pub fn permits(&self, tenant: &str, reference: &PullSecretRef) -> Result<(), String> {
        let Some(source) = reference.source() else {
            return Err("the pull secret reference names no single source".into());
        };
        let granted =
            self.grants
                .iter()
                .filter(|g| g.tenant == tenant)
                .any(|g| match (&g.source, source) {
                    (
                        AllowedSource::KubernetesNamespace(namespace),
                        SecretSource::Kubernetes(secret),
                    ) => *namespace == secret.namespace,
                    (
                        AllowedSource::SecretsManagerArn(pattern),
                        SecretSource::SecretsManager(secret),
                    ) => matches(pattern, &secret.arn),
                    _ => false,
                });
        if granted {
            Ok(())
        } else {
            Err(format!(
                "tenant {tenant:?} may not read the {source}: this server grants it {}",
                self.described_for(tenant)
            ))
        }
    }

    fn described_for(&self, tenant: &str) -> String {
        let mine: Vec<String> = self
            .grants
            .iter()
            .filter(|g| g.tenant == tenant)
            .map(|g| match &g.source {
                AllowedSource::KubernetesNamespace(namespace) => format!("kubernetes:{namespace}"),
                AllowedSource::SecretsManagerArn(pattern) => pattern.clone(),
            })
            .collect();
        if mine.is_empty() {
            "no secret references (--allow-secret-ref)".into()
        } else {
            mine.join(", ")
        }
    }

    /// Grants that would let a tenant read Secrets hcpflow itself writes: a namespace
    /// HostedClusters may go into (where every cluster's `<name>-pull-secret` lives), or a
    /// control-plane namespace (`<that namespace>-<cluster>`). The server refuses to start
    /// with one.
    pub fn overlapping(&self, hosted_cluster_namespaces: &[String]) -> Vec<String> {
        self.grants
            .iter()
            .filter_map(|grant| match &grant.source {
                AllowedSource::KubernetesNamespace(namespace) => Some((grant, namespace)),
                AllowedSource::SecretsManagerArn(_) => None,
            })
            .filter(|(_, namespace)| {
                hosted_cluster_namespaces.iter().any(|allowed| {
                    matches(allowed, namespace)
                        || namespace.starts_with(&format!("{}-", allowed.trim_end_matches('*')))
                })
            })
            .map(|(grant, namespace)| {
                format!(
                    "{}=kubernetes:{namespace}: HostedClusters or their control planes may live there, so it would grant other clusters' pull secrets",
                    grant.tenant
                )
            })
            .collect()
    }

    /// Intake's check of a start's input: a create's `pull_secret_ref` must be one the
    /// tenant is granted. Other types, and inline pull secrets, pass.
    pub fn check(&self, tenant: &str, workflow_type: &str, input: &Value) -> Vec<String> {
        if workflow_type != CREATE {
            return Vec::new();
        }
        let Some(reference) = input.get("pull_secret_ref").filter(|v| !v.is_null()) else {
            return Vec::new();
        };
        // The input's own validation runs first; fail closed all the same.
        let Ok(reference) = serde_json::from_value::<PullSecretRef>(reference.clone()) else {
            return vec!["pull_secret_ref: not a reference this server can read".into()];
        };
        match self.permits(tenant, &reference) {
            Ok(()) => Vec::new(),
            Err(problem) => vec![format!("pull_secret_ref: {problem}")],
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn reference(value: Value) -> PullSecretRef {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn a_reference_names_exactly_one_valid_source() {
        let k8s = reference(json!({"kubernetes": {"namespace": "pull", "name": "team-a"}}));
        assert!(k8s.problems("pull_secret_ref").is_empty());
        assert_eq!(k8s.kubernetes.as_ref().unwrap().key, ".dockerconfigjson");
        let arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:team-a/pull-AbCdEf";
        let sm = reference(json!({"aws_secrets_manager": {"arn": arn}}));
        assert!(sm.problems("pull_secret_ref").is_empty());
        assert_eq!(SecretsManagerArn::parse(arn).unwrap().region, "us-east-1");

        let both = reference(json!({"kubernetes": {"namespace": "pull", "name": "a"},
                                    "aws_secrets_manager": {"arn": arn}}));
        assert!(both.problems("pull_secret_ref")[0].contains("exactly one"));
        assert!(reference(json!({})).problems("p")[0].contains("exactly one"));
        let bad = reference(
            json!({"kubernetes": {"namespace": "Not_A_Namespace", "name": "a", "key": "a/b"}}),
        );
        assert_eq!(bad.problems("p").len(), 2, "{:?}", bad.problems("p"));
        let typo = reference(
            json!({"aws_secrets_manager": {"arn": "arn:aws:secretsmanager:useast1:123456789012:secret:x"}}),
        );
        assert!(!typo.problems("p").is_empty());
        let bad_arn = reference(json!({"aws_secrets_manager": {"arn": "arn:aws:s3:::bucket"}}));
        assert!(bad_arn.problems("p")[0].contains("not a Secrets Manager secret ARN"));
    }

    #[test]
    fn a_tenant_reads_only_what_it_is_granted() {
        let policy = SecretRefPolicy::new(vec![
            "team-a=kubernetes:team-a-pull".parse().unwrap(),
            "team-a=arn:aws:secretsmanager:us-east-1:123456789012:secret:team-a/*"
                .parse()
                .unwrap(),
        ]);
        let ours = reference(json!({"kubernetes": {"namespace": "team-a-pull", "name": "x"}}));
        assert_eq!(policy.permits("team-a", &ours), Ok(()));
        let refused = policy.permits("team-b", &ours).unwrap_err();
        assert!(refused.contains("team-b") && refused.contains("no secret references"));
        let theirs = reference(json!({"kubernetes": {"namespace": "team-b-pull", "name": "x"}}));
        assert!(policy.permits("team-a", &theirs).is_err());

        let arn = |name: &str| {
            reference(
                json!({"aws_secrets_manager": {"arn": format!("arn:aws:secretsmanager:us-east-1:123456789012:secret:{name}")}}),
            )
        };
        assert_eq!(policy.permits("team-a", &arn("team-a/pull-x1")), Ok(()));
        assert!(policy.permits("team-a", &arn("team-b/pull-x1")).is_err());

        let input =
            json!({"pull_secret_ref": {"kubernetes": {"namespace": "team-b-pull", "name": "x"}}});
        assert!(policy.check("team-a", CREATE, &input)[0].starts_with("pull_secret_ref: "));
        assert!(policy.check("team-a", "scale_node_pool", &input).is_empty());
        assert!(policy
            .check("team-a", CREATE, &json!({"pull_secret": "{}"}))
            .is_empty());
    }

    #[test]
    fn grants_parse_or_say_what_they_should_be() {
        let grant: SecretRefGrant = "default=kubernetes:hcpflow-pull".parse().unwrap();
        assert_eq!(
            grant.source,
            AllowedSource::KubernetesNamespace("hcpflow-pull".into())
        );
        for bad in [
            "default",
            "default=vault:x",
            "Not A Tenant=kubernetes:x",
            "default=kubernetes:Bad_NS",
            "default=arn:aws:s3:::bucket",
            "default=arn:aws:secretsmanager:us-east-1:123456789012:secret:team-a*",
            "default=arn:aws:secretsmanager:us-east-1x:123456789012:secret:team-a/*",
            "default=kubernetes:kube-system",
            "default=kubernetes:openshift-config",
        ] {
            let error = bad.parse::<SecretRefGrant>().unwrap_err();
            assert!(error.contains(bad), "{error}");
        }
    }

    #[test]
    fn a_grant_may_not_reach_where_hosted_clusters_keep_their_secrets() {
        let policy = SecretRefPolicy::new(vec![
            "a=kubernetes:clusters".parse().unwrap(),
            "a=kubernetes:clusters-demo".parse().unwrap(),
            "a=kubernetes:ns-x".parse().unwrap(),
            "a=kubernetes:pull-secrets".parse().unwrap(),
        ]);
        let refused = policy.overlapping(&["clusters".into(), "ns-*".into()]);
        assert_eq!(refused.len(), 3, "{refused:?}");
        assert!(!refused.join(" ").contains("pull-secrets"));
    }

    #[test]
    fn an_unreadable_reference_is_refused_at_intake() {
        let policy = SecretRefPolicy::default();
        let input = json!({"pull_secret_ref": {"vault": "x"}});
        assert!(!policy.check("a", CREATE, &input).is_empty());
    }
}
