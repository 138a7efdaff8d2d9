//! AWS accounts besides the server's own: a create names one for the hosted cluster's
//! objects (`aws_account`: the VPC, zones, IAM roles, instances) and one for the
//! management side (`management_aws_account`: the OIDC bucket, the management VPC the
//! operators' PrivateLink service sits in), as HyperShift places them. The server's
//! configuration names each account by the role hcpflow assumes into it and the tenants
//! that may use it; a create that names an account its tenant may not use is refused
//! at intake. Histories record the account's name, never its credentials.

use std::fmt;
use std::str::FromStr;

use hcpflow_engine::TenantId;
use serde::Serialize;
use serde_json::Value;

use crate::create::TYPE as CREATE;
use crate::input::is_dns_label;
use crate::pull_secret_ref::is_region;

/// The create input's fields that name accounts.
pub const ACCOUNT_FIELDS: [&str; 2] = ["aws_account", "management_aws_account"];

/// One account: `NAME=ROLE_ARN;tenants=T1|T2[;external_id=ID][;region=R]` (`tenants=*`:
/// every tenant; `region`: where STS is asked).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AwsAccount {
    pub name: String,
    /// The role hcpflow assumes (`sts:AssumeRole`) to act in the account.
    pub role_arn: String,
    /// The external id the role's trust policy requires, if any. Not a secret, but
    /// kept out of logs and the configuration dump all the same.
    #[serde(skip)]
    pub external_id: Option<String>,
    /// Who may name the account; `*` is everyone.
    pub tenants: Vec<String>,
    /// The region of the STS endpoint the role is assumed through (regional STS);
    /// `None`: the server's own region.
    pub sts_region: Option<String>,
}

impl AwsAccount {
    /// The 12-digit account id of the role.
    pub fn account_id(&self) -> &str {
        role_account(&self.role_arn).unwrap_or_default()
    }

    fn permits(&self, tenant: &str) -> bool {
        self.tenants.iter().any(|t| t == "*" || t == tenant)
    }
}

/// An account name: a DNS label of at most 63 characters.
pub fn is_account_name(name: &str) -> bool {
    is_dns_label(name, 63)
}

/// The account id of `arn:<partition>:iam::<account>:role/<path/name>`.
pub fn role_account(arn: &str) -> Option<&str> {
    let parts: Vec<&str> = arn.splitn(6, ':').collect();
    match parts[..] {
        ["arn", partition, "iam", "", account, resource]
            if !partition.is_empty()
                && account.len() == 12
                && account.bytes().all(|b| b.is_ascii_digit())
                && resource.len() > "role/".len()
                && resource.starts_with("role/") =>
        {
            Some(account)
        }
        _ => None,
    }
}

impl FromStr for AwsAccount {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let usage = "an AWS account is NAME=arn:aws:iam::ACCOUNT:role/ROLE;tenants=T1|T2 (or tenants=*), optionally ;external_id=ID and ;region=R (of STS)";
        let (name, rest) = text
            .split_once('=')
            .ok_or_else(|| format!("{text:?}: {usage}"))?;
        let name = name.trim();
        if !is_account_name(name) {
            return Err(format!(
                "{name:?} is not an account name (a DNS label); {usage}"
            ));
        }
        let mut parts = rest.split(';').map(str::trim);
        let role_arn = parts.next().unwrap_or_default();
        if role_account(role_arn).is_none() {
            return Err(format!(
                "account {name}: {role_arn:?} is not an IAM role ARN; {usage}"
            ));
        }
        let mut tenants = None;
        let mut external_id = None;
        let mut sts_region = None;
        for part in parts.filter(|p| !p.is_empty()) {
            match part.split_once('=') {
                Some(("tenants", list)) => {
                    let list: Vec<String> = list
                        .split('|')
                        .map(str::trim)
                        .filter(|t| !t.is_empty())
                        .map(str::to_owned)
                        .collect();
                    if let Some(bad) = list
                        .iter()
                        .find(|t| *t != "*" && TenantId::new(t.as_str()).is_err())
                    {
                        return Err(format!(
                            "account {name}: {bad:?} is not a tenant name; {usage}"
                        ));
                    }
                    tenants = Some(list);
                }
                Some(("external_id", id)) if (2..=1224).contains(&id.len()) => {
                    external_id = Some(id.to_owned());
                }
                Some(("region", region)) if is_region(region) => {
                    sts_region = Some(region.to_owned());
                }
                Some(("external_id", _)) => {
                    return Err(format!(
                        "account {name}: an external id has 2 to 1224 characters"
                    ))
                }
                _ => return Err(format!("account {name}: {part:?}? {usage}")),
            }
        }
        let tenants = tenants
            .filter(|t| !t.is_empty())
            .ok_or_else(|| format!("account {name}: say which tenants may use it; {usage}"))?;
        Ok(Self {
            name: name.to_owned(),
            role_arn: role_arn.to_owned(),
            external_id,
            tenants,
            sts_region,
        })
    }
}

/// The accounts a server may act in besides its own. Empty (the default): only its own.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct AwsAccounts {
    accounts: Vec<AwsAccount>,
}

impl AwsAccounts {
    /// Errors: two accounts of one name.
    pub fn new(accounts: Vec<AwsAccount>) -> Result<Self, String> {
        for (i, account) in accounts.iter().enumerate() {
            if accounts[..i].iter().any(|a| a.name == account.name) {
                return Err(format!("AWS account {} is named twice", account.name));
            }
        }
        Ok(Self { accounts })
    }

    pub fn get(&self, name: &str) -> Option<&AwsAccount> {
        self.accounts.iter().find(|a| a.name == name)
    }

    pub fn is_empty(&self) -> bool {
        self.accounts.is_empty()
    }

    /// Intake's check of a start's input: every account a create names is one this
    /// server knows and the tenant may use. Unknown and not permitted read the same, so
    /// a tenant learns nothing of other tenants' accounts.
    pub fn check(&self, tenant: &str, workflow_type: &str, input: &Value) -> Vec<String> {
        if workflow_type != CREATE {
            return Vec::new();
        }
        ACCOUNT_FIELDS
            .iter()
            .filter_map(|field| Some((field, input.get(field)?.as_str()?)))
            .filter(|(_, name)| !self.get(name).is_some_and(|a| a.permits(tenant)))
            .map(|(field, name)| {
                format!(
                    "{field}: tenant {tenant:?} may not use the AWS account {name:?}: this server lets it use {}",
                    self.described_for(tenant)
                )
            })
            .collect()
    }

    fn described_for(&self, tenant: &str) -> String {
        let mine: Vec<&str> = self
            .accounts
            .iter()
            .filter(|a| a.permits(tenant))
            .map(|a| a.name.as_str())
            .collect();
        if mine.is_empty() {
            "only the server's own (--aws-account names others)".into()
        } else {
            format!("its own and {}", mine.join(", "))
        }
    }
}

impl fmt::Display for AwsAccount {
    /// The name and role, for messages: never the external id.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name, self.role_arn)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn accounts() -> AwsAccounts {
        AwsAccounts::new(vec![
            "guest=arn:aws:iam::111111111111:role/hcpflow;tenants=acme|globex;external_id=xyz"
                .parse()
                .unwrap(),
            "shared=arn:aws:iam::222222222222:role/path/hcpflow;tenants=*"
                .parse()
                .unwrap(),
        ])
        .unwrap()
    }

    #[test]
    fn an_account_parses_with_its_role_tenants_and_external_id() {
        let accounts = accounts();
        let guest = accounts.get("guest").unwrap();
        assert_eq!(guest.account_id(), "111111111111");
        assert_eq!(guest.tenants, ["acme", "globex"]);
        assert_eq!(guest.external_id.as_deref(), Some("xyz"));
        assert!(!serde_json::to_string(&accounts).unwrap().contains("xyz"));
        assert_eq!(accounts.get("shared").unwrap().account_id(), "222222222222");
        assert_eq!(guest.sts_region, None);
        let regional: AwsAccount = "r=arn:aws:iam::111111111111:role/r;tenants=*;region=eu-west-1"
            .parse()
            .unwrap();
        assert_eq!(regional.sts_region.as_deref(), Some("eu-west-1"));
    }

    #[test]
    fn malformed_accounts_are_refused_with_the_reason() {
        for (text, says) in [
            ("guest", "NAME=arn"),
            (
                "Guest=arn:aws:iam::111111111111:role/r;tenants=*",
                "account name",
            ),
            ("g=arn:aws:iam::1111:role/r;tenants=*", "IAM role ARN"),
            (
                "g=arn:aws:iam::111111111111:user/r;tenants=*",
                "IAM role ARN",
            ),
            ("g=arn:aws:iam::111111111111:role/r", "which tenants"),
            (
                "g=arn:aws:iam::111111111111:role/r;tenants=",
                "which tenants",
            ),
            (
                "g=arn:aws:iam::111111111111:role/r;tenants=A B",
                "tenant name",
            ),
            (
                "g=arn:aws:iam::111111111111:role/r;tenants=*;region=x",
                "region=x",
            ),
            (
                "g=arn:aws:iam::111111111111:role/r;tenants=*;external_id=x",
                "2 to 1224",
            ),
        ] {
            let error = text.parse::<AwsAccount>().unwrap_err();
            assert!(error.contains(says), "{text}: {error}");
        }
        let twice = AwsAccounts::new(vec![
            "g=arn:aws:iam::111111111111:role/r;tenants=*"
                .parse()
                .unwrap(),
            "g=arn:aws:iam::222222222222:role/r;tenants=*"
                .parse()
                .unwrap(),
        ]);
        assert!(twice.unwrap_err().contains("named twice"));
    }

    #[test]
    fn a_create_may_name_only_the_accounts_its_tenant_may_use() {
        let accounts = accounts();
        let create = |guest: &str, management: &str| json!({"name": "demo", "aws_account": guest, "management_aws_account": management});
        assert!(accounts
            .check("acme", CREATE, &create("guest", "shared"))
            .is_empty());
        let refused = accounts.check("initech", CREATE, &create("guest", "nope"));
        assert_eq!(refused.len(), 2, "{refused:?}");
        assert!(refused[0].starts_with("aws_account: tenant \"initech\" may not use"));
        assert!(refused[1].contains("its own and shared"), "{refused:?}");
        // Naming no account is the server's own, for everyone; other types pass.
        assert!(accounts
            .check("initech", CREATE, &json!({"name": "demo"}))
            .is_empty());
        assert!(accounts
            .check("initech", "noop_chain", &create("guest", "guest"))
            .is_empty());
        assert!(
            AwsAccounts::default().check("acme", CREATE, &create("guest", "guest"))[0]
                .contains("only the server's own")
        );
    }
}
