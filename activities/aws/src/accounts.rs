//! Clients per (account, region): the server's own account in any region, and the
//! accounts of its configuration through the role it assumes into each
//! (`sts:AssumeRole`). Each set of clients is made once; the SDK caches the assumed
//! role's credentials and refreshes them before they expire.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use hcpflow_engine::ActivityFailure;
use hcpflow_hypershift::aws_accounts::AwsAccounts;

use crate::clients::AwsClients;

/// The session name of the assumed roles: what CloudTrail shows as the caller.
const SESSION_NAME: &str = "hcpflow";

#[derive(Debug)]
pub struct AccountClients {
    /// The server's own account, in its own region.
    own: AwsClients,
    accounts: AwsAccounts,
    made: Mutex<HashMap<(Option<String>, String), AwsClients>>,
}

impl AccountClients {
    pub fn new(own: AwsClients, accounts: AwsAccounts) -> Arc<Self> {
        Arc::new(Self {
            own,
            accounts,
            made: Mutex::default(),
        })
    }

    /// The server's own clients, in its own region.
    pub fn own(&self) -> &AwsClients {
        &self.own
    }

    /// The clients of `account` (its configured name; `None`: the server's own) in
    /// `region`.
    ///
    /// Errors: a retryable `UnknownAwsAccount` when this process's configuration does
    /// not name the account (during a rollout another process may have accepted the
    /// create: the retry waits for this one's configuration). A role that cannot be
    /// assumed fails the first call made with the clients, classified as that call's
    /// error.
    pub async fn clients(
        &self,
        account: Option<&str>,
        region: &str,
    ) -> Result<AwsClients, ActivityFailure> {
        if account.is_none() && region == self.own.region {
            return Ok(self.own.clone());
        }
        let key = (account.map(str::to_owned), region.to_owned());
        if let Some(clients) = self.lock().get(&key) {
            return Ok(clients.clone());
        }
        let clients = match account {
            None => self.own.in_region(region),
            Some(name) => {
                let account = self.accounts.get(name).ok_or_else(|| {
                    ActivityFailure::retryable(
                        "UnknownAwsAccount",
                        format!(
                            "this worker's configuration names no AWS account {name:?} (--aws-account)"
                        ),
                    )
                })?;
                AwsClients {
                    account: Some(account.name.clone()),
                    ..self
                        .own
                        .assuming(
                            &account.role_arn,
                            account.external_id.as_deref(),
                            account.sts_region.as_deref(),
                            SESSION_NAME,
                            region,
                        )
                        .await
                }
            }
        };
        // Two first calls at once both make clients; the first one kept is used.
        Ok(self.lock().entry(key).or_insert(clients).clone())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(Option<String>, String), AwsClients>> {
        self.made
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
