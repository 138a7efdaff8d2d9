//! Connecting to NATS, as a server process or a client: credentials, TLS, and retrying
//! while NATS is starting.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context};
use serde::Deserialize;

/// A value that never shows in logs or `Debug` output.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

#[derive(Debug, Clone)]
pub struct NatsConfig {
    pub url: String,
    pub user: Option<String>,
    pub password: Option<Secret>,
    pub token: Option<Secret>,
    /// Connect over TLS, trusting this CA.
    pub ca_file: Option<PathBuf>,
    /// A client certificate and its key (PEM), for a NATS that verifies clients (mTLS).
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    /// A file holding the user's nkey seed (`SU...`): authentication by signature, the
    /// seed never sent.
    pub nkey_seed_file: Option<PathBuf>,
    /// A `.creds` file (a user JWT and its nkey seed), for a NATS run in operator mode.
    pub creds_file: Option<PathBuf>,
    /// The prefix of this client's reply subjects (NATS's default is `_INBOX`): with
    /// per-user permissions, each user reads replies under its own prefix only.
    pub inbox_prefix: Option<String>,
}

impl NatsConfig {
    /// The servers `url` names: one URL, or several separated by commas (the nodes of a
    /// cluster; the client moves to another when the one it uses goes away, and learns
    /// the rest of the cluster from whichever it reaches).
    pub fn servers(&self) -> Vec<&str> {
        self.url
            .split(',')
            .map(str::trim)
            .filter(|url| !url.is_empty())
            .collect()
    }
}

/// Adds the client's identity beyond user, password and token: a client certificate,
/// an nkey, or a `.creds` file. An unreadable file is an error at once, naming it.
async fn with_identity(
    mut options: async_nats::ConnectOptions,
    config: &NatsConfig,
) -> anyhow::Result<async_nats::ConnectOptions> {
    match (&config.tls_cert, &config.tls_key) {
        (Some(cert), Some(key)) => {
            options = options
                .add_client_certificate(cert.clone(), key.clone())
                .require_tls(true);
        }
        (None, None) => {}
        _ => bail!("a NATS client certificate needs both its certificate and its key file"),
    }
    if let Some(path) = &config.nkey_seed_file {
        let seed = std::fs::read_to_string(path)
            .with_context(|| format!("reading the NATS nkey seed {}", path.display()))?;
        options = options.nkey(seed.trim().to_owned());
    }
    if let Some(path) = &config.creds_file {
        options = options
            .credentials_file(path)
            .await
            .with_context(|| format!("reading the NATS credentials {}", path.display()))?;
    }
    Ok(options)
}

/// Connects, retrying for up to 30 s while NATS is unreachable (it may be starting);
/// refused credentials or an untrusted certificate fail at once, with the reason.
/// Once connected, the client reconnects by itself.
pub async fn connect(config: &NatsConfig, name: &str) -> anyhow::Result<async_nats::Client> {
    use async_nats::ConnectErrorKind;

    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let mut options = async_nats::ConnectOptions::new()
            .name(name)
            .connection_timeout(Duration::from_secs(5))
            // What NATS refuses (a permission violation, say) is otherwise silent.
            .event_callback(|event| async move {
                if let async_nats::Event::ServerError(error) = event {
                    tracing::warn!(%error, "NATS reported an error");
                }
            });
        if let (Some(user), Some(password)) = (&config.user, &config.password) {
            options = options.user_and_password(user.clone(), password.expose().to_owned());
        }
        if let Some(token) = &config.token {
            options = options.token(token.expose().to_owned());
        }
        if let Some(ca) = &config.ca_file {
            options = options.add_root_certificates(ca.clone()).require_tls(true);
        }
        if let Some(prefix) = &config.inbox_prefix {
            options = options.custom_inbox_prefix(prefix.clone());
        }
        options = with_identity(options, config).await?;
        let error = match options.connect(config.servers().as_slice()).await {
            Ok(client) => return Ok(client),
            Err(error) => error,
        };
        let permanent = match error.kind() {
            ConnectErrorKind::Authentication | ConnectErrorKind::AuthorizationViolation => {
                Some("NATS refused the credentials (HCPFLOW_NATS_USER/PASSWORD or TOKEN)")
            }
            ConnectErrorKind::ServerParse => Some(
                "HCPFLOW_NATS_URL is not a NATS URL, nor a comma-separated list of them",
            ),
            ConnectErrorKind::Tls => Some(
                "TLS with NATS failed (is the server's certificate signed by HCPFLOW_NATS_CA_FILE?)",
            ),
            _ => None,
        };
        if let Some(reason) = permanent {
            bail!("connecting to NATS at {}: {reason}: {error}", config.url);
        }
        if tokio::time::Instant::now() >= deadline {
            bail!("connecting to NATS at {} for 30 s: {error}", config.url);
        }
        tracing::warn!(url = %config.url, %error, "NATS not reachable yet; retrying");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
