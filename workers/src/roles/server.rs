//! `hcpflow server` and `hcpflow worker`: the roles, started together or alone, with a
//! graceful shutdown (stop taking tasks, finish the ones in flight; unacked tasks go
//! back to NATS for another process).

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use async_nats::jetstream;
use hcpflow_aws::{AwsActivities, AwsClients};
use hcpflow_engine::{AuditSigningKey, Keyring};
use hcpflow_eventstore::EventStore;
use hcpflow_kube::{KubeActivities, KubeSettings};
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;

use crate::api::intake::Intake;
use crate::api::router::Api;
use crate::api::submit::Submissions;
use crate::catalog;
use crate::catalog::registry as registry_activities;
use crate::cli::config::Config;
use crate::cli::migrate;
use crate::roles::activity_worker::ActivityWorker;
use crate::roles::checkpointer::Checkpointer;
use crate::roles::relay::Relay;
use crate::roles::sweeper::Sweeper;
use crate::roles::timer_service::TimerService;
use crate::roles::workflow_worker::WorkflowWorker;
use crate::runtime::eager::EagerDispatch;
use crate::runtime::journal::Journal;
use crate::runtime::metrics::Metrics;
use crate::runtime::nats::{self, durable_consumer};
use hcpflow_protocol::subjects::{StreamRole, Subjects};

/// What a process does. `hcpflow server` runs them all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    /// The request/reply API and the submit stream.
    Api,
    /// Workflow tasks, and the sweeper.
    Workflow,
    /// Activity tasks of the configured task queues.
    Activity,
    /// The outbox relay, and the checkpointer (signed heads of histories).
    Relay,
    /// Durable timers and retry backoffs.
    Timer,
}

impl Role {
    pub const ALL: [Role; 5] = [
        Role::Api,
        Role::Workflow,
        Role::Activity,
        Role::Relay,
        Role::Timer,
    ];
}

impl FromStr for Role {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "api" => Ok(Role::Api),
            "workflow" => Ok(Role::Workflow),
            "activity" => Ok(Role::Activity),
            "relay" => Ok(Role::Relay),
            "timer" => Ok(Role::Timer),
            other => Err(format!(
                "unknown role {other:?}: api, workflow, activity, relay or timer"
            )),
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Role::Api => "api",
            Role::Workflow => "workflow",
            Role::Activity => "activity",
            Role::Relay => "relay",
            Role::Timer => "timer",
        })
    }
}

/// The Kubernetes activities' client. A cluster configured explicitly must be usable;
/// with nothing configured and nothing to infer, the process runs without them.
async fn connect_kube(
    settings: &KubeSettings,
    keyring: Option<Arc<Keyring>>,
) -> anyhow::Result<Option<Arc<KubeActivities>>> {
    match settings.connect().await {
        Ok(client) => Ok(Some(Arc::new(KubeActivities::new(client, keyring)))),
        Err(error) if settings.is_explicit() => {
            Err(anyhow::Error::new(error).context("connecting to the management cluster"))
        }
        Err(error) => {
            let error = format!("{:#}", anyhow::Error::new(error));
            tracing::warn!(%error, "no management cluster configured: Kubernetes activities are not served");
            Ok(None)
        }
    }
}

/// Runs `roles` until `shutdown` turns true.
pub async fn run(
    config: Config,
    roles: &[Role],
    shutdown: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let subjects = Subjects::new(&config.prefix)?;
    if let Some(admin) = &config.database_admin_url {
        migrate::database(admin.expose(), Some(config.database_url.expose())).await?;
    }
    let pool_size =
        u32::try_from(config.workflow_concurrency + config.activity_concurrency / 2 + 8)
            .unwrap_or(64)
            .min(96);
    let store = EventStore::connect(config.database_url.expose(), pool_size)
        .await
        .context("connecting to Postgres")?;
    let client = hcpflow_protocol::connect(&config.nats, "hcpflow").await?;
    let js = jetstream::new(client.clone());
    nats::ensure_streams(
        &js,
        &subjects,
        i32::try_from(config.max_body_bytes * 2).unwrap_or(i32::MAX),
    )
    .await?;

    let metrics = Arc::new(Metrics::default());
    let keyring = match &config.seal_key {
        Some(key) => Some(Arc::new(
            Keyring::parse(key.expose()).context("HCPFLOW_SEAL_KEY")?,
        )),
        None => None,
    };
    let audit_key = match &config.audit_signing_key {
        Some(key) => Some(Arc::new(
            AuditSigningKey::from_text(key.expose()).context("HCPFLOW_AUDIT_SIGNING_KEY")?,
        )),
        None => None,
    };
    // AWS clients only where activities run; loading them reads no credentials yet.
    let (aws, kube) = if roles.contains(&Role::Activity) {
        let aws = Arc::new(AwsActivities {
            clients: AwsClients::connect(&config.aws).await,
            keyring: keyring.clone(),
        });
        (
            Some(aws),
            connect_kube(&config.kube, keyring.clone()).await?,
        )
    } else {
        (None, None)
    };
    let (catalog, mut activities) = catalog::build(aws, kube)?;
    registry_activities::register_all(&mut activities, Arc::new(store.clone()));
    let catalog = catalog.shared();
    // Steps run workflow code in-line only where this process has the workflow role.
    let runs_workflows = roles.contains(&Role::Workflow);
    let journal = Arc::new(Journal::new(
        store,
        js.clone(),
        subjects.clone(),
        metrics.clone(),
        runs_workflows.then(|| catalog.clone()),
    ));
    let intake = Arc::new(Intake {
        journal: journal.clone(),
        catalog: catalog.clone(),
        keyring,
    });
    let name = format!("{}-{}", hostname(), std::process::id());

    let mut tasks: JoinSet<(String, anyhow::Result<()>)> = JoinSet::new();
    let mut spawn = |label: String,
                     task: std::pin::Pin<
        Box<dyn std::future::Future<Output = anyhow::Result<()>> + Send>,
    >| {
        tasks.spawn(async move { (label, task.await) });
    };
    for role in roles {
        match role {
            Role::Api => {
                let api = Arc::new(Api {
                    intake: intake.clone(),
                    client: client.clone(),
                    max_body_bytes: config.max_body_bytes,
                    audit_public_key: audit_key.as_ref().map(|k| *k.public_key()),
                });
                spawn("api".into(), Box::pin(api.run(shutdown.clone())));
                let consumer = durable_consumer(
                    &js,
                    &subjects.stream(StreamRole::Submit),
                    "intake",
                    subjects.submit_start(),
                )
                .await?;
                let submissions = Submissions {
                    intake: intake.clone(),
                    max_body_bytes: config.max_body_bytes,
                };
                spawn(
                    "submit".into(),
                    Box::pin(submissions.run(consumer, shutdown.clone())),
                );
            }
            Role::Workflow => {
                let consumer = durable_consumer(
                    &js,
                    &subjects.stream(StreamRole::Tasks),
                    "workflow",
                    subjects.workflow_tasks(),
                )
                .await?;
                let worker = WorkflowWorker::new(journal.clone(), config.workflow_concurrency);
                spawn(
                    "workflow".into(),
                    Box::pin(worker.run(consumer, shutdown.clone())),
                );
                let sweeper = Sweeper {
                    journal: journal.clone(),
                    idle: Duration::from_secs(60),
                    every: Duration::from_secs(15),
                };
                spawn("sweeper".into(), Box::pin(sweeper.run(shutdown.clone())));
            }
            Role::Activity => {
                let activities = Arc::new(activities.clone());
                let mut eager = EagerDispatch::new(format!("eager-{name}"));
                for queue in &config.task_queues {
                    let consumer = durable_consumer(
                        &js,
                        &subjects.stream(StreamRole::Tasks),
                        &format!("activity-{queue}"),
                        subjects.activity_tasks(queue),
                    )
                    .await?;
                    let slots = Arc::new(Semaphore::new(config.activity_concurrency));
                    let local = eager.serve(queue, slots.clone());
                    let worker = Arc::new(ActivityWorker {
                        journal: journal.clone(),
                        activities: activities.clone(),
                        concurrency: config.activity_concurrency,
                        slots,
                    });
                    spawn(
                        format!("activity-{queue}"),
                        Box::pin(worker.run(consumer, local, shutdown.clone())),
                    );
                }
                journal.enable_eager_dispatch(eager);
            }
            Role::Relay => {
                let relay = Relay {
                    journal: journal.clone(),
                    name: format!("relay-{name}"),
                };
                spawn("relay".into(), Box::pin(relay.run(shutdown.clone())));
                match &audit_key {
                    Some(key) => {
                        let checkpointer = Checkpointer {
                            journal: journal.clone(),
                            key: key.clone(),
                            name: format!("checkpointer-{name}"),
                            live_every: config.checkpoint_every,
                        };
                        spawn(
                            "checkpointer".into(),
                            Box::pin(checkpointer.run(shutdown.clone())),
                        );
                    }
                    None => tracing::warn!(
                        "no audit signing key (HCPFLOW_AUDIT_SIGNING_KEY): histories are hash-chained but not signed"
                    ),
                }
            }
            Role::Timer => {
                let timers = TimerService {
                    journal: journal.clone(),
                    name: format!("timer-{name}"),
                };
                spawn("timer".into(), Box::pin(timers.run(shutdown.clone())));
            }
        }
    }
    spawn(
        "published-marks".into(),
        Box::pin(journal.clone().mark_published_until(shutdown.clone())),
    );
    if let Some(addr) = config.metrics_addr {
        spawn(
            "metrics".into(),
            Box::pin(crate::runtime::metrics::serve(
                addr,
                metrics.clone(),
                shutdown.clone(),
            )),
        );
    }
    let labels: Vec<String> = roles.iter().map(Role::to_string).collect();
    tracing::info!(roles = labels.join(","), prefix = subjects.prefix(), nats = %config.nats.url, "hcpflow running");

    let mut failure = None;
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok((label, Ok(()))) => tracing::debug!(label, "stopped"),
            Ok((label, Err(error))) => {
                tracing::error!(label, %error, "a role failed; shutting down");
                failure.get_or_insert(anyhow::anyhow!("{label}: {error:#}"));
                tasks.abort_all();
            }
            Err(error) if error.is_cancelled() => {}
            Err(error) => {
                failure.get_or_insert(anyhow::anyhow!("a role panicked: {error}"));
                tasks.abort_all();
            }
        }
    }
    journal.flush_published().await;
    let _ = client.flush().await;
    match failure {
        Some(error) => Err(error),
        None => {
            tracing::info!("hcpflow stopped");
            Ok(())
        }
    }
}

/// Turns SIGINT or SIGTERM into a shutdown signal.
pub fn shutdown_on_signals() -> watch::Receiver<bool> {
    let (sender, receiver) = watch::channel(false);
    tokio::spawn(async move {
        let terminate = async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut signal) => {
                    signal.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = terminate => {}
        }
        tracing::info!("shutting down: finishing tasks in flight");
        let _ = sender.send(true);
    });
    receiver
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "host".to_owned())
}
