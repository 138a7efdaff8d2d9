//! Configuration, layered — the one rule, for every setting and every command: a flag
//! beats its environment variable (clap reads both), which beats the TOML file
//! (`--config` / `HCPFLOW_CONFIG`), which beats the default. Only the binary reads the
//! environment; `hcpflow config` prints what a process would run with.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use serde::Deserialize;

use crate::runtime::nats::{StreamLimits, DEFAULT_STREAM_MAX_BYTES};
use hcpflow_engine::TenantId;
use hcpflow_hypershift::admission::AdmissionPolicy;
use hcpflow_hypershift::aws_accounts::AwsAccounts;
use hcpflow_hypershift::pull_secret_ref::SecretRefPolicy;
use hcpflow_protocol::{NatsConfig, Secret};

/// The resolved configuration of a server or worker process.
#[derive(Debug, Clone)]
pub struct Config {
    pub database_url: Secret,
    pub database_admin_url: Option<Secret>,
    pub nats: NatsConfig,
    pub prefix: String,
    /// `HCPFLOW_SEAL_KEY`: seals submitted secrets at intake.
    pub seal_key: Option<Secret>,
    /// `HCPFLOW_INPUT_DIGEST_KEY`: keys the digests of start inputs, apart from the seal
    /// keys so that rotating those keeps resubmissions idempotent.
    pub input_digest_key: Option<Secret>,
    /// Where the seal keys (and the digest key, if from a file) were read: looked at
    /// every `key_reload_every`, and the keys replaced when they change.
    pub key_files: crate::runtime::key_reload::KeyFiles,
    pub key_reload_every: std::time::Duration,
    /// `HCPFLOW_AUDIT_SIGNING_KEY`: signs histories' checkpoints (Ed25519 seed).
    pub audit_signing_key: Option<Secret>,
    /// How often a running workflow's head is signed while it moves.
    pub checkpoint_every: std::time::Duration,
    /// Largest request or submit body accepted, in bytes.
    pub max_body_bytes: usize,
    /// Bytes of signals one workflow may receive in all.
    pub max_signal_bytes: usize,
    /// How long a submission failing for a passing reason is retried before it is
    /// dead-lettered.
    pub submit_retry_for: std::time::Duration,
    pub metrics_addr: Option<SocketAddr>,
    /// Workflow tasks run at once by one process.
    pub workflow_concurrency: usize,
    /// Activity attempts run at once by one process.
    pub activity_concurrency: usize,
    /// Bytes of activity tasks this process's steps keep for itself while every
    /// activity slot is taken, per task queue (0: none; they go through NATS).
    pub activity_backlog_bytes: usize,
    /// The longest a task waits in that backlog before it goes to NATS.
    pub activity_backlog_wait: std::time::Duration,
    /// How long published outbox rows, fired timers and lapsed attempt claims are kept
    /// before the relay deletes them.
    pub done_retention: std::time::Duration,
    /// Postgres connections this process may hold; unset, sized from its roles
    /// (`database_pool_size`).
    pub database_pool_size: Option<u32>,
    /// API requests handled at once, waiting, and how long one may wait; beyond them,
    /// `overloaded`.
    pub api_queue: crate::api::queue::QueueLimits,
    /// Activity task queues this process serves.
    pub task_queues: Vec<String>,
    /// The NATS streams' replicas and bounds (applied where this process migrates).
    pub stream_limits: StreamLimits,
    /// What a start may ask of the management cluster (node pools, annotations,
    /// namespaces, release registries).
    pub admission: AdmissionPolicy,
    /// Which pull secret references each tenant may name (none by default).
    pub secret_refs: SecretRefPolicy,
    /// The AWS accounts a create may name besides the server's own, and who may.
    pub aws_accounts: AwsAccounts,
    /// Whether the built-in `noop_*` workflows run here (tests and benchmarks): off by
    /// default, so a production server runs only the workflows it is for.
    pub builtin_workflows: bool,
    /// AWS region and endpoint override; credentials come from the standard AWS chain
    /// (environment, profile, instance role).
    pub aws: hcpflow_aws::AwsSettings,
    /// The management cluster: a URL, a kubeconfig, or (neither) in-cluster / default
    /// kubeconfig inference.
    pub kube: hcpflow_kube::KubeSettings,
}

/// The config file: every key optional, unknown keys rejected.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    /// The tenant a client acts for.
    pub tenant: Option<String>,
    pub database_url: Option<Secret>,
    pub database_admin_url: Option<Secret>,
    pub nats_url: Option<String>,
    pub nats_user: Option<String>,
    pub nats_password: Option<Secret>,
    pub nats_token: Option<Secret>,
    pub nats_ca_file: Option<PathBuf>,
    pub nats_inbox_prefix: Option<String>,
    pub nats_tls_cert: Option<PathBuf>,
    pub nats_tls_key: Option<PathBuf>,
    pub nats_nkey_seed_file: Option<PathBuf>,
    pub nats_creds_file: Option<PathBuf>,
    pub prefix: Option<String>,
    pub seal_key: Option<Secret>,
    pub input_digest_key: Option<Secret>,
    pub audit_signing_key: Option<Secret>,
    pub checkpoint_every_secs: Option<u64>,
    pub key_reload_secs: Option<u64>,
    pub max_body_bytes: Option<usize>,
    pub max_signal_bytes: Option<usize>,
    pub submit_retry_secs: Option<u64>,
    pub metrics_addr: Option<SocketAddr>,
    pub workflow_concurrency: Option<usize>,
    pub activity_concurrency: Option<usize>,
    pub database_pool_size: Option<u32>,
    pub activity_backlog_bytes: Option<usize>,
    pub activity_backlog_wait_secs: Option<u64>,
    pub done_retention_secs: Option<u64>,
    pub api_concurrency: Option<usize>,
    pub api_queue: Option<usize>,
    pub api_queue_wait_ms: Option<u64>,
    pub task_queues: Option<Vec<String>>,
    pub builtin_workflows: Option<bool>,
    pub stream_replicas: Option<usize>,
    pub stream_max_bytes: Option<i64>,
    pub max_node_pools: Option<usize>,
    pub allowed_annotations: Option<Vec<String>>,
    pub allow_image_overrides: Option<bool>,
    pub allowed_namespaces: Option<Vec<String>>,
    pub allowed_release_registries: Option<Vec<String>>,
    pub allow_secret_refs: Option<Vec<String>>,
    pub aws_accounts: Option<Vec<String>>,
    pub aws_region: Option<String>,
    pub aws_endpoint: Option<String>,
    pub kube_url: Option<String>,
    pub kubeconfig: Option<PathBuf>,
}

impl ConfigFile {
    pub fn read(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading config file {}", path.display()))?;
        toml::from_str(&text).with_context(|| format!("parsing config file {}", path.display()))
    }
}

/// Connection settings shared by every subcommand that talks to the stack.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ConfigArgs {
    /// The config file, NATS and the prefix.
    #[command(flatten)]
    pub client: ClientArgs,
    /// The application role's Postgres URL.
    #[arg(long, env = "HCPFLOW_DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
    /// The migration owner's Postgres URL (migrations run at start when given).
    #[arg(long, env = "HCPFLOW_DATABASE_ADMIN_URL", hide_env_values = true)]
    pub database_admin_url: Option<String>,
    #[arg(long, env = "HCPFLOW_SEAL_KEY", hide_env_values = true)]
    pub seal_key: Option<String>,
    /// The key of start-input digests (32 bytes, base64): kept when seal keys rotate.
    #[arg(long, env = "HCPFLOW_INPUT_DIGEST_KEY", hide_env_values = true)]
    pub input_digest_key: Option<String>,
    /// The audit key (a 32-byte Ed25519 seed, base64 or hex): signs history checkpoints.
    #[arg(long, env = "HCPFLOW_AUDIT_SIGNING_KEY", hide_env_values = true)]
    pub audit_signing_key: Option<String>,
    /// `--seal-key` read from this file (kept out of the environment and the process
    /// list), read at start and again whenever it changes.
    #[arg(long, env = "HCPFLOW_SEAL_KEY_FILE")]
    pub seal_key_file: Option<PathBuf>,
    /// How often the key files are looked at for a change (seconds).
    #[arg(long, env = "HCPFLOW_KEY_RELOAD_SECS")]
    pub key_reload_secs: Option<u64>,
    /// `--input-digest-key` read from this file (reloaded with the seal key file, when
    /// the seal key comes from one).
    #[arg(long, env = "HCPFLOW_INPUT_DIGEST_KEY_FILE")]
    pub input_digest_key_file: Option<PathBuf>,
    /// `--audit-signing-key` read from this file.
    #[arg(long, env = "HCPFLOW_AUDIT_SIGNING_KEY_FILE")]
    pub audit_signing_key_file: Option<PathBuf>,
    /// Sign a running workflow's moving head this often (seconds); ended ones at once.
    #[arg(long, env = "HCPFLOW_CHECKPOINT_EVERY_SECS")]
    pub checkpoint_every_secs: Option<u64>,
    #[arg(long, env = "HCPFLOW_MAX_BODY_BYTES")]
    pub max_body_bytes: Option<usize>,
    /// Bytes of signals (name and payload) one workflow may receive in all; beyond it a
    /// signal is refused with `too_large`.
    #[arg(long, env = "HCPFLOW_MAX_SIGNAL_BYTES")]
    pub max_signal_bytes: Option<usize>,
    /// Seconds a submission failing for a passing reason (database down, no seal key)
    /// is retried, from when it was published; then it is dead-lettered.
    #[arg(long, env = "HCPFLOW_SUBMIT_RETRY_SECS")]
    pub submit_retry_secs: Option<u64>,
    /// Serve Prometheus metrics on this address (e.g. 127.0.0.1:9464).
    #[arg(long, env = "HCPFLOW_METRICS_ADDR")]
    pub metrics_addr: Option<SocketAddr>,
    #[arg(long, env = "HCPFLOW_WORKFLOW_CONCURRENCY")]
    pub workflow_concurrency: Option<usize>,
    #[arg(long, env = "HCPFLOW_ACTIVITY_CONCURRENCY")]
    pub activity_concurrency: Option<usize>,
    /// Postgres connections one process may hold (default: sized from its roles).
    #[arg(long, env = "HCPFLOW_DATABASE_POOL_SIZE")]
    pub database_pool_size: Option<u32>,
    /// Bytes of activity tasks a process keeps waiting for a slot, per task queue.
    #[arg(long, env = "HCPFLOW_ACTIVITY_BACKLOG_BYTES")]
    pub activity_backlog_bytes: Option<usize>,
    /// Seconds an activity task waits in that backlog at most, then goes to NATS.
    #[arg(long, env = "HCPFLOW_ACTIVITY_BACKLOG_WAIT_SECS")]
    pub activity_backlog_wait_secs: Option<u64>,
    /// Seconds published outbox rows, fired timers and lapsed claims are kept (at least 60).
    #[arg(long, env = "HCPFLOW_DONE_RETENTION_SECS")]
    pub done_retention_secs: Option<u64>,
    /// API requests one process handles at once.
    #[arg(long, env = "HCPFLOW_API_CONCURRENCY")]
    pub api_concurrency: Option<usize>,
    /// API requests that may wait for their turn; beyond them, `overloaded`.
    #[arg(long, env = "HCPFLOW_API_QUEUE")]
    pub api_queue: Option<usize>,
    /// The longest an API request waits for its turn before it is answered `overloaded`.
    #[arg(long, env = "HCPFLOW_API_QUEUE_WAIT_MS")]
    pub api_queue_wait_ms: Option<u64>,
    /// Activity task queues to serve, comma-separated.
    #[arg(long, env = "HCPFLOW_TASK_QUEUES", value_delimiter = ',')]
    pub task_queues: Option<Vec<String>>,
    /// Run the built-in noop_* workflows (tests and benchmarks); off by default.
    #[arg(
        long,
        env = "HCPFLOW_BUILTIN_WORKFLOWS",
        num_args = 0..=1,
        default_missing_value = "true"
    )]
    pub builtin_workflows: Option<bool>,
    /// Copies of each NATS stream (3 on a NATS cluster); applied by `migrate`.
    #[arg(long, env = "HCPFLOW_STREAM_REPLICAS")]
    pub stream_replicas: Option<usize>,
    /// Bytes each NATS stream may hold; applied by `migrate`.
    #[arg(long, env = "HCPFLOW_STREAM_MAX_BYTES")]
    pub stream_max_bytes: Option<i64>,
    /// Node pools a create may ask for.
    #[arg(long, env = "HCPFLOW_MAX_NODE_POOLS")]
    pub max_node_pools: Option<usize>,
    /// Annotation keys a create may set (exact, or prefixes ending in `*`), comma-separated.
    #[arg(long, env = "HCPFLOW_ALLOWED_ANNOTATIONS", value_delimiter = ',')]
    pub allowed_annotations: Option<Vec<String>>,
    /// Let an allowed annotation override an image (a key ending in `-image`).
    #[arg(
        long,
        env = "HCPFLOW_ALLOW_IMAGE_OVERRIDES",
        num_args = 0..=1,
        default_missing_value = "true"
    )]
    pub allow_image_overrides: Option<bool>,
    /// Namespaces a HostedCluster may go into (exact, or prefixes ending in `*`).
    #[arg(long, env = "HCPFLOW_ALLOWED_NAMESPACES", value_delimiter = ',')]
    pub allowed_namespaces: Option<Vec<String>>,
    /// Registries release images may come from (prefixes), comma-separated.
    #[arg(
        long,
        env = "HCPFLOW_ALLOWED_RELEASE_REGISTRIES",
        value_delimiter = ','
    )]
    pub allowed_release_registries: Option<Vec<String>>,
    /// Pull secret references a tenant may name, comma-separated:
    /// `TENANT=kubernetes:NAMESPACE` (any Secret of that management-cluster namespace) or
    /// `TENANT=arn:aws:secretsmanager:REGION:ACCOUNT:secret:NAME` (`.../PATH/*` allows every
    /// secret under a path). None by default.
    #[arg(
        long = "allow-secret-ref",
        env = "HCPFLOW_ALLOW_SECRET_REFS",
        value_delimiter = ','
    )]
    pub allow_secret_refs: Option<Vec<String>>,
    /// AWS accounts a create may name besides the server's own (`aws_account`,
    /// `management_aws_account`), comma-separated:
    /// `NAME=arn:aws:iam::ACCOUNT:role/ROLE;tenants=T1|T2[;external_id=ID]`
    /// (`tenants=*`: every tenant). hcpflow assumes the role to act there.
    #[arg(
        long = "aws-account",
        env = "HCPFLOW_AWS_ACCOUNTS",
        value_delimiter = ','
    )]
    pub aws_accounts: Option<Vec<String>>,
    /// The AWS clients' home region (a create's calls go to the create's own region).
    #[arg(long, env = "AWS_REGION")]
    pub aws_region: Option<String>,
    /// One endpoint for every AWS service (moto, or a proxy); unset for real AWS.
    #[arg(long, env = "HCPFLOW_AWS_ENDPOINT")]
    pub aws_endpoint: Option<String>,
    /// The management cluster's API server URL, used without credentials (the local
    /// emulator); unset to use a kubeconfig or in-cluster configuration.
    #[arg(long, env = "HCPFLOW_KUBE_URL")]
    pub kube_url: Option<String>,
    /// A kubeconfig for the management cluster (its current context).
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
}

/// What a client of the NATS API needs (the `cluster`, `workflow` and `audit` commands,
/// `bench`), and part of every process's settings: the config file, NATS and the
/// prefix. Global, so they may follow a subcommand.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ClientArgs {
    /// A TOML config file; environment variables and flags override it.
    #[arg(long, env = "HCPFLOW_CONFIG", global = true)]
    pub config: Option<PathBuf>,
    #[arg(long, env = "HCPFLOW_NATS_URL", global = true)]
    pub nats_url: Option<String>,
    #[arg(long, env = "HCPFLOW_NATS_USER", global = true)]
    pub nats_user: Option<String>,
    #[arg(
        long,
        env = "HCPFLOW_NATS_PASSWORD",
        hide_env_values = true,
        global = true
    )]
    pub nats_password: Option<String>,
    #[arg(
        long,
        env = "HCPFLOW_NATS_TOKEN",
        hide_env_values = true,
        global = true
    )]
    pub nats_token: Option<String>,
    /// A CA file: connect to NATS over TLS and trust this CA.
    #[arg(long, env = "HCPFLOW_NATS_CA_FILE", global = true)]
    pub nats_ca_file: Option<PathBuf>,
    /// The prefix of this client's reply subjects (`_INBOX_<user>` with the
    /// permissions of `hcpflow nats permissions`).
    #[arg(long, env = "HCPFLOW_NATS_INBOX_PREFIX", global = true)]
    pub nats_inbox_prefix: Option<String>,
    /// A client certificate (PEM) for a NATS that verifies clients (mTLS); with
    /// `--nats-tls-key`.
    #[arg(long, env = "HCPFLOW_NATS_TLS_CERT", global = true)]
    pub nats_tls_cert: Option<PathBuf>,
    #[arg(long, env = "HCPFLOW_NATS_TLS_KEY", global = true)]
    pub nats_tls_key: Option<PathBuf>,
    /// A file holding the NATS user's nkey seed.
    #[arg(long, env = "HCPFLOW_NATS_NKEY_SEED_FILE", global = true)]
    pub nats_nkey_seed_file: Option<PathBuf>,
    /// A NATS `.creds` file (user JWT and seed).
    #[arg(long, env = "HCPFLOW_NATS_CREDS_FILE", global = true)]
    pub nats_creds_file: Option<PathBuf>,
    /// Subject and stream prefix.
    #[arg(long, env = "HCPFLOW_PREFIX", global = true)]
    pub prefix: Option<String>,
    /// The tenant a client acts for (its API subjects `<prefix>.api.v1.<tenant>.*`).
    #[arg(long, env = "HCPFLOW_TENANT", global = true)]
    pub tenant: Option<String>,
}

impl ClientArgs {
    /// The config file, or an empty one.
    fn file(&self) -> anyhow::Result<ConfigFile> {
        match &self.config {
            Some(path) => ConfigFile::read(path),
            None => Ok(ConfigFile::default()),
        }
    }

    fn nats_layered(&self, file: &ConfigFile) -> anyhow::Result<NatsConfig> {
        let nats = NatsConfig {
            url: self
                .nats_url
                .clone()
                .or_else(|| file.nats_url.clone())
                .unwrap_or_else(|| DEFAULT_NATS_URL.to_owned()),
            user: self.nats_user.clone().or_else(|| file.nats_user.clone()),
            password: self
                .nats_password
                .clone()
                .map(Secret::new)
                .or_else(|| file.nats_password.clone()),
            token: self
                .nats_token
                .clone()
                .map(Secret::new)
                .or_else(|| file.nats_token.clone()),
            ca_file: self
                .nats_ca_file
                .clone()
                .or_else(|| file.nats_ca_file.clone()),
            inbox_prefix: self
                .nats_inbox_prefix
                .clone()
                .or_else(|| file.nats_inbox_prefix.clone()),
            tls_cert: self
                .nats_tls_cert
                .clone()
                .or_else(|| file.nats_tls_cert.clone()),
            tls_key: self
                .nats_tls_key
                .clone()
                .or_else(|| file.nats_tls_key.clone()),
            nkey_seed_file: self
                .nats_nkey_seed_file
                .clone()
                .or_else(|| file.nats_nkey_seed_file.clone()),
            creds_file: self
                .nats_creds_file
                .clone()
                .or_else(|| file.nats_creds_file.clone()),
        };
        if nats.tls_cert.is_some() != nats.tls_key.is_some() {
            bail!("a NATS client certificate needs both --nats-tls-cert and --nats-tls-key");
        }
        if nats.user.is_some() != nats.password.is_some() {
            bail!("NATS user and password must be given together");
        }
        Ok(nats)
    }

    fn prefix_layered(&self, file: &ConfigFile) -> String {
        self.prefix
            .clone()
            .or_else(|| file.prefix.clone())
            .unwrap_or_else(|| DEFAULT_PREFIX.to_owned())
    }

    /// The NATS settings and prefix alone (clients need no database).
    pub fn nats(&self) -> anyhow::Result<(NatsConfig, String)> {
        let file = self.file()?;
        Ok((self.nats_layered(&file)?, self.prefix_layered(&file)))
    }

    /// The tenant a client acts for: `--tenant`, else the config file's, else `default`.
    pub fn tenant(&self) -> anyhow::Result<TenantId> {
        let file = self.file()?;
        let tenant = self
            .tenant
            .clone()
            .or(file.tenant)
            .unwrap_or_else(|| TenantId::DEFAULT.to_owned());
        Ok(TenantId::new(tenant)?)
    }

    /// A connected API client for the configured NATS, prefix and tenant.
    pub async fn api(&self) -> anyhow::Result<hcpflow_protocol::ApiClient> {
        let (nats, prefix) = self.nats()?;
        hcpflow_protocol::ApiClient::connect(&nats, &prefix, self.tenant()?).await
    }
}

impl Config {
    /// The settings as `hcpflow config` prints them: secrets only as `"[set]"`.
    pub fn describe(&self) -> serde_json::Value {
        let secret = |value: &Option<Secret>| value.as_ref().map(|_| "[set]");
        serde_json::json!({
            "database_url": "[set]",
            "database_admin_url": secret(&self.database_admin_url),
            "nats_url": self.nats.url,
            "nats_user": self.nats.user,
            "nats_password": secret(&self.nats.password),
            "nats_token": secret(&self.nats.token),
            "nats_ca_file": self.nats.ca_file,
            "nats_inbox_prefix": self.nats.inbox_prefix,
            "nats_tls_cert": self.nats.tls_cert,
            "nats_tls_key": self.nats.tls_key,
            "nats_nkey_seed_file": self.nats.nkey_seed_file,
            "nats_creds_file": self.nats.creds_file,
            "prefix": self.prefix,
            "seal_key": secret(&self.seal_key),
            "input_digest_key": secret(&self.input_digest_key),
            "audit_signing_key": secret(&self.audit_signing_key),
            "checkpoint_every_secs": self.checkpoint_every.as_secs(),
            "seal_key_file": self.key_files.seal,
            "input_digest_key_file": self.key_files.input_digest,
            "key_reload_secs": self.key_reload_every.as_secs(),
            "max_body_bytes": self.max_body_bytes,
            "max_signal_bytes": self.max_signal_bytes,
            "submit_retry_secs": self.submit_retry_for.as_secs(),
            "metrics_addr": self.metrics_addr.map(|addr| addr.to_string()),
            "workflow_concurrency": self.workflow_concurrency,
            "activity_concurrency": self.activity_concurrency,
            "database_pool_size": self.database_pool_size,
            "activity_backlog_bytes": self.activity_backlog_bytes,
            "activity_backlog_wait_secs": self.activity_backlog_wait.as_secs(),
            "done_retention_secs": self.done_retention.as_secs(),
            "api_concurrency": self.api_queue.concurrency,
            "api_queue": self.api_queue.waiting,
            "api_queue_wait_ms": self.api_queue.max_wait.as_millis() as u64,
            "task_queues": self.task_queues,
            "builtin_workflows": self.builtin_workflows,
            "stream_replicas": self.stream_limits.replicas,
            "stream_max_bytes": self.stream_limits.max_bytes,
            "max_node_pools": self.admission.max_node_pools,
            "allowed_annotations": self.admission.annotations,
            "allow_image_overrides": self.admission.image_overrides,
            "allowed_namespaces": self.admission.namespaces,
            "allowed_release_registries": self.admission.release_registries,
            "allow_secret_refs": self.secret_refs,
            "aws_accounts": self.aws_accounts,
            "aws_region": self.aws.region,
            "aws_endpoint": self.aws.endpoint,
            "kube_url": self.kube.url,
            "kubeconfig": self.kube.kubeconfig,
        })
    }
}

/// What `hcpflow migrate` runs with: the owner's URL (required), the application role's,
/// and the streams' settings.
#[derive(Debug, Clone)]
pub struct MigrateSettings {
    pub admin_url: Secret,
    pub app_url: Option<Secret>,
    pub nats: NatsConfig,
    pub prefix: String,
    pub stream_limits: StreamLimits,
}

pub const DEFAULT_PREFIX: &str = "hcpflow";
pub const DEFAULT_NATS_URL: &str = "nats://127.0.0.1:4222";
pub const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;

/// 64 MiB of activity tasks waiting for a slot per task queue: tens of thousands of small
/// ones (a task weighs its message plus 1 KiB).
pub const DEFAULT_ACTIVITY_BACKLOG_BYTES: usize = 64 << 20;
pub const DEFAULT_MAX_SIGNAL_BYTES: usize = 16 * 1024 * 1024;
pub const DEFAULT_SUBMIT_RETRY_SECS: u64 = 3600;
/// An hour of published outbox rows, fired timers and lapsed claims is kept for a look
/// at what just happened; never less than a minute, the relay's purge period.
pub const DEFAULT_DONE_RETENTION_SECS: u64 = 3600;
pub const MIN_DONE_RETENTION_SECS: u64 = 60;
pub const DEFAULT_AWS_REGION: &str = "us-east-1";
pub const DEFAULT_CHECKPOINT_EVERY_SECS: u64 = 60;
pub const DEFAULT_KEY_RELOAD_SECS: u64 = 30;

impl ConfigArgs {
    /// The database URL, layered; `None` when neither flag, environment nor file gives
    /// one (commands that can do without it).
    pub fn database_url(&self) -> anyhow::Result<Option<Secret>> {
        let file = self.client.file()?;
        Ok(self
            .database_url
            .clone()
            .map(Secret::new)
            .or(file.database_url))
    }

    /// `hcpflow migrate`'s settings, layered like the rest.
    pub fn migrate_settings(&self) -> anyhow::Result<MigrateSettings> {
        let file = self.client.file()?;
        let Some(admin_url) = self
            .database_admin_url
            .clone()
            .map(Secret::new)
            .or(file.database_admin_url.clone())
        else {
            bail!("migrate needs the owner's URL: HCPFLOW_DATABASE_ADMIN_URL, --database-admin-url or database_admin_url in the config file");
        };
        Ok(MigrateSettings {
            admin_url,
            app_url: self
                .database_url
                .clone()
                .map(Secret::new)
                .or(file.database_url.clone()),
            nats: self.client.nats_layered(&file)?,
            prefix: self.client.prefix_layered(&file),
            stream_limits: self.stream_limits_layered(&file),
        })
    }

    /// The admission policy, each limit layered on its own over the defaults.
    fn admission_layered(&self, file: &ConfigFile) -> AdmissionPolicy {
        let default = AdmissionPolicy::default();
        AdmissionPolicy {
            max_node_pools: self
                .max_node_pools
                .or(file.max_node_pools)
                .unwrap_or(default.max_node_pools),
            annotations: self
                .allowed_annotations
                .clone()
                .or_else(|| file.allowed_annotations.clone())
                .unwrap_or(default.annotations),
            image_overrides: self
                .allow_image_overrides
                .or(file.allow_image_overrides)
                .unwrap_or(default.image_overrides),
            namespaces: self
                .allowed_namespaces
                .clone()
                .or_else(|| file.allowed_namespaces.clone())
                .unwrap_or(default.namespaces),
            release_registries: self
                .allowed_release_registries
                .clone()
                .or_else(|| file.allowed_release_registries.clone())
                .unwrap_or(default.release_registries),
        }
    }

    /// The secret-reference grants: flag or variable, else the file's; each must parse.
    fn secret_refs_layered(&self, file: &ConfigFile) -> anyhow::Result<SecretRefPolicy> {
        let grants = self
            .allow_secret_refs
            .clone()
            .or_else(|| file.allow_secret_refs.clone())
            .unwrap_or_default();
        let grants = grants
            .iter()
            .filter(|grant| !grant.trim().is_empty())
            .map(|grant| grant.parse().map_err(anyhow::Error::msg))
            .collect::<anyhow::Result<Vec<_>>>()
            .context("HCPFLOW_ALLOW_SECRET_REFS / --allow-secret-ref")?;
        Ok(SecretRefPolicy::new(grants))
    }

    /// The AWS accounts: flag or variable, else the file's; each must parse.
    fn aws_accounts_layered(&self, file: &ConfigFile) -> anyhow::Result<AwsAccounts> {
        let accounts = self
            .aws_accounts
            .clone()
            .or_else(|| file.aws_accounts.clone())
            .unwrap_or_default();
        let accounts = accounts
            .iter()
            .filter(|account| !account.trim().is_empty())
            .map(|account| account.parse().map_err(anyhow::Error::msg))
            .collect::<anyhow::Result<Vec<_>>>()
            .and_then(|accounts| AwsAccounts::new(accounts).map_err(anyhow::Error::msg))
            .context("HCPFLOW_AWS_ACCOUNTS / --aws-account")?;
        Ok(accounts)
    }

    /// The streams' limits: replicas, bytes, and the submit stream's largest message
    /// (twice the largest body).
    fn stream_limits_layered(&self, file: &ConfigFile) -> StreamLimits {
        let max_body_bytes = self
            .max_body_bytes
            .or(file.max_body_bytes)
            .unwrap_or(DEFAULT_MAX_BODY_BYTES);
        StreamLimits {
            replicas: self
                .stream_replicas
                .or(file.stream_replicas)
                .unwrap_or(1)
                .max(1),
            max_bytes: self
                .stream_max_bytes
                .or(file.stream_max_bytes)
                .unwrap_or(DEFAULT_STREAM_MAX_BYTES),
            max_message_size: i32::try_from(max_body_bytes * 2).unwrap_or(i32::MAX),
        }
    }

    /// Defaults ← file ← environment ← flags (clap already put env under flags).
    pub fn resolve(&self) -> anyhow::Result<Config> {
        let file = self.client.file()?;
        let stream_limits = self.stream_limits_layered(&file);
        let admission = self.admission_layered(&file);
        let secret_refs = self.secret_refs_layered(&file)?;
        let aws_accounts = self.aws_accounts_layered(&file)?;
        let overlapping = secret_refs.overlapping(&admission.namespaces);
        if !overlapping.is_empty() {
            bail!(
                "--allow-secret-ref grants a namespace of hosted clusters: {}",
                overlapping.join("; ")
            );
        }
        let nats = self.client.nats_layered(&file)?;
        let prefix = self.client.prefix_layered(&file);
        let Some(database_url) = self
            .database_url
            .clone()
            .map(Secret::new)
            .or(file.database_url)
        else {
            bail!("no database URL: set HCPFLOW_DATABASE_URL, --database-url or database_url in the config file");
        };
        let task_queues = self
            .task_queues
            .clone()
            .or(file.task_queues)
            .unwrap_or_else(|| vec!["default".to_owned()]);
        Ok(Config {
            database_url,
            database_admin_url: self
                .database_admin_url
                .clone()
                .map(Secret::new)
                .or(file.database_admin_url),
            nats,
            prefix,
            seal_key: key_layered(
                "HCPFLOW_SEAL_KEY",
                &self.seal_key,
                &self.seal_key_file,
                file.seal_key,
            )?,
            input_digest_key: key_layered(
                "HCPFLOW_INPUT_DIGEST_KEY",
                &self.input_digest_key,
                &self.input_digest_key_file,
                file.input_digest_key,
            )?,
            key_files: crate::runtime::key_reload::KeyFiles {
                seal: self.seal_key_file.clone(),
                input_digest: self.input_digest_key_file.clone(),
            },
            key_reload_every: std::time::Duration::from_secs(
                self.key_reload_secs
                    .or(file.key_reload_secs)
                    .unwrap_or(DEFAULT_KEY_RELOAD_SECS)
                    .max(1),
            ),
            // Empty means unset (`HCPFLOW_AUDIT_SIGNING_KEY=` turns signing off).
            audit_signing_key: key_layered(
                "HCPFLOW_AUDIT_SIGNING_KEY",
                &self.audit_signing_key,
                &self.audit_signing_key_file,
                file.audit_signing_key,
            )?
            .filter(|key| !key.expose().trim().is_empty()),
            checkpoint_every: std::time::Duration::from_secs(
                self.checkpoint_every_secs
                    .or(file.checkpoint_every_secs)
                    .unwrap_or(DEFAULT_CHECKPOINT_EVERY_SECS)
                    .max(1),
            ),
            max_body_bytes: self
                .max_body_bytes
                .or(file.max_body_bytes)
                .unwrap_or(DEFAULT_MAX_BODY_BYTES),
            max_signal_bytes: self
                .max_signal_bytes
                .or(file.max_signal_bytes)
                .unwrap_or(DEFAULT_MAX_SIGNAL_BYTES),
            submit_retry_for: std::time::Duration::from_secs(
                self.submit_retry_secs
                    .or(file.submit_retry_secs)
                    .unwrap_or(DEFAULT_SUBMIT_RETRY_SECS),
            ),
            metrics_addr: self.metrics_addr.or(file.metrics_addr),
            workflow_concurrency: self
                .workflow_concurrency
                .or(file.workflow_concurrency)
                .unwrap_or(32)
                .max(1),
            activity_concurrency: self
                .activity_concurrency
                .or(file.activity_concurrency)
                .unwrap_or(64)
                .max(1),
            activity_backlog_bytes: self
                .activity_backlog_bytes
                .or(file.activity_backlog_bytes)
                .unwrap_or(DEFAULT_ACTIVITY_BACKLOG_BYTES),
            activity_backlog_wait: self
                .activity_backlog_wait_secs
                .or(file.activity_backlog_wait_secs)
                .map_or(
                    crate::runtime::eager::DEFAULT_BACKLOG_WAIT,
                    std::time::Duration::from_secs,
                ),
            done_retention: std::time::Duration::from_secs(
                self.done_retention_secs
                    .or(file.done_retention_secs)
                    .unwrap_or(DEFAULT_DONE_RETENTION_SECS)
                    .max(MIN_DONE_RETENTION_SECS),
            ),
            database_pool_size: self
                .database_pool_size
                .or(file.database_pool_size)
                .map(|size| size.max(2)),
            api_queue: {
                let default = crate::api::queue::QueueLimits::default();
                crate::api::queue::QueueLimits {
                    concurrency: self
                        .api_concurrency
                        .or(file.api_concurrency)
                        .unwrap_or(default.concurrency)
                        .max(1),
                    waiting: self.api_queue.or(file.api_queue).unwrap_or(default.waiting),
                    max_wait: self
                        .api_queue_wait_ms
                        .or(file.api_queue_wait_ms)
                        .map_or(default.max_wait, std::time::Duration::from_millis),
                }
            },
            task_queues,
            builtin_workflows: self
                .builtin_workflows
                .or(file.builtin_workflows)
                .unwrap_or(false),
            stream_limits,
            admission,
            secret_refs,
            aws_accounts,
            aws: hcpflow_aws::AwsSettings {
                region: self
                    .aws_region
                    .clone()
                    .or(file.aws_region)
                    .unwrap_or_else(|| DEFAULT_AWS_REGION.to_owned()),
                endpoint: self.aws_endpoint.clone().or(file.aws_endpoint),
                static_credentials: None,
            },
            kube: hcpflow_kube::KubeSettings {
                url: self.kube_url.clone().or(file.kube_url),
                kubeconfig: self.kubeconfig.clone().or(file.kubeconfig),
            },
        })
    }
}

/// A key from its flag or variable, else from the file its `_FILE` twin names, else
/// from the config file; both the value and a file is a mistake worth stopping for.
fn key_layered(
    name: &str,
    value: &Option<String>,
    path: &Option<PathBuf>,
    from_config: Option<Secret>,
) -> anyhow::Result<Option<Secret>> {
    match (value, path) {
        (Some(_), Some(_)) => bail!("{name} and {name}_FILE are both set: give one"),
        (Some(value), None) => Ok(Some(Secret::new(value.clone()))),
        (None, Some(path)) => Ok(Some(crate::runtime::key_reload::read_key_file(
            &format!("{name}_FILE"),
            path,
        )?)),
        (None, None) => Ok(from_config),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> ConfigArgs {
        ConfigArgs::default()
    }

    #[test]
    fn flags_and_env_override_the_file_which_overrides_defaults() {
        let dir = std::env::temp_dir().join(format!("hcpflow-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("hcpflow.toml");
        std::fs::write(
            &path,
            "database_url = \"postgres://file\"\nprefix = \"fromfile\"\nmax_body_bytes = 10\n",
        )
        .unwrap();
        let mut args = args();
        args.client.config = Some(path.clone());
        args.client.prefix = Some("fromflag".into());
        let config = args.resolve().unwrap();
        assert_eq!(config.database_url.expose(), "postgres://file");
        assert_eq!(config.prefix, "fromflag");
        assert_eq!(config.max_body_bytes, 10);
        assert_eq!(config.nats.url, DEFAULT_NATS_URL);
        // Off unless asked for: the built-in noop_* workflows; streams are bounded.
        assert!(!config.builtin_workflows);
        assert_eq!(config.stream_limits.max_bytes, DEFAULT_STREAM_MAX_BYTES);
        const { assert!(DEFAULT_STREAM_MAX_BYTES > 0) };
        assert!(
            !format!("{config:?}").contains("postgres://file"),
            "secrets stay out of Debug"
        );

        std::fs::write(&path, "databse_url = \"typo\"\n").unwrap();
        assert!(args.resolve().is_err(), "unknown keys are rejected");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn keys_may_come_from_files_but_not_from_a_file_and_a_value() {
        let dir = std::env::temp_dir().join(format!("hcpflow-keyfile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("seal-key");
        std::fs::write(&path, "k1:AAAA\n").unwrap();
        let mut args = args();
        args.database_url = Some("postgres://x".into());
        args.seal_key_file = Some(path);
        let config = args.resolve().unwrap();
        assert_eq!(
            config.seal_key.as_ref().map(Secret::expose),
            Some("k1:AAAA")
        );
        args.seal_key = Some("k2:BBBB".into());
        let both = args.resolve().unwrap_err().to_string();
        assert!(both.contains("HCPFLOW_SEAL_KEY_FILE"), "{both}");
        args.seal_key = None;
        args.seal_key_file = Some(dir.join("missing"));
        assert!(args.resolve().is_err());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn migrate_and_bench_read_the_file_like_every_command() {
        let dir = std::env::temp_dir().join(format!("hcpflow-migrate-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("hcpflow.toml");
        std::fs::write(
            &path,
            "database_admin_url = \"postgres://owner\"\ndatabase_url = \"postgres://app\"\nmax_body_bytes = 7\n",
        )
        .unwrap();
        let mut args = args();
        assert!(
            args.migrate_settings().is_err(),
            "the owner's URL is required"
        );
        args.client.config = Some(path);
        let settings = args.migrate_settings().unwrap();
        assert_eq!(settings.admin_url.expose(), "postgres://owner");
        assert_eq!(
            settings.app_url.map(|u| u.expose().to_owned()).as_deref(),
            Some("postgres://app")
        );
        assert_eq!(settings.stream_limits.max_message_size, 14);
        args.database_url = Some("postgres://flag".into());
        assert_eq!(
            args.database_url().unwrap().unwrap().expose(),
            "postgres://flag"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_database_url_is_required_and_nats_credentials_come_in_pairs() {
        assert!(args().resolve().is_err());
        let mut with_user = args();
        with_user.database_url = Some("postgres://x".into());
        with_user.client.nats_user = Some("u".into());
        assert!(with_user.resolve().is_err());
    }
}
