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
use hcpflow_engine::{AuditSigningKey, SealKeys};
use hcpflow_eventstore::EventStore;
use hcpflow_kube::{KubeActivities, KubeSettings};
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;

use crate::api::intake::Intake;
use crate::api::queue::RequestQueue;
use crate::api::router::Api;
use crate::api::submit::{intake_consumers, Submissions};
use crate::catalog;
use crate::catalog::activities::ActivityRegistry;
use crate::catalog::registry as registry_activities;
use crate::catalog::secret_refs::SecretRefs;
use crate::cli::config::Config;
use crate::cli::migrate;
use crate::roles::activity_worker::ActivityWorker;
use crate::roles::activity_worker::Runners;
use crate::roles::checkpointer::Checkpointer;
use crate::roles::relay::Relay;
use crate::roles::sweeper::Sweeper;
use crate::roles::timer_service::TimerService;
use crate::roles::workflow_worker::WorkflowWorker;
use crate::runtime::eager::EagerDispatch;
use crate::runtime::journal::Journal;
use crate::runtime::key_reload;
use crate::runtime::metrics::Metrics;
use crate::runtime::nats::{self, durable_consumer};
use crate::runtime::seal_key_check::check_seal_keys;
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
/// with nothing configured and nothing to infer, the process runs without them. Pull
/// secret references are read for the tenants `secret_refs` grants them.
async fn connect_kube(
    settings: &KubeSettings,
    seal_keys: Option<Arc<SealKeys>>,
    secret_refs: impl FnOnce(kube::Client) -> SecretRefs,
) -> anyhow::Result<Option<Arc<KubeActivities>>> {
    match settings.connect().await {
        Ok(client) => Ok(Some(Arc::new(
            KubeActivities::new(client.clone(), seal_keys)
                .with_secret_refs(Arc::new(secret_refs(client))),
        ))),
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

/// How often a process waiting for its schema looks again.
const SCHEMA_POLL: Duration = Duration::from_secs(5);

/// Waits, before any role starts, until the database's schema is at the migration this
/// build needs or newer. A rolling upgrade may start the new release's processes before
/// its migrate Job has run: taking tasks then would run the new code on the old schema.
async fn wait_for_schema(
    store: &EventStore,
    mut shutdown: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let mut said = None;
    loop {
        let why = match hcpflow_eventstore::migrate::schema_serves_this_build(store.pool()).await {
            Ok(_) => return Ok(()),
            Err(why) => why,
        };
        if said.as_ref() != Some(&why) {
            tracing::warn!(%why, "waiting for the schema before starting any role");
            said = Some(why);
        }
        tokio::select! {
            _ = shutdown.changed() => anyhow::bail!("stopped while waiting for the schema to be migrated"),
            _ = tokio::time::sleep(SCHEMA_POLL) => {}
        }
    }
}

/// How long a stopping process waits for NATS to take what its client still buffers.
const FINAL_FLUSH_WAIT: Duration = Duration::from_secs(5);
/// How long the roles have to finish after SIGTERM: under Kubernetes' default
/// `terminationGracePeriodSeconds` (30), with room for the final flushes.
const STOP_GRACE: Duration = Duration::from_secs(20);

/// The order the roles start in: those that take work last. The activity role first,
/// as it lets steps run the activities they schedule here (eager dispatch): a step
/// taken before that sends its activity through NATS. The API last (after the
/// operators' endpoint too, see [`run`]), so that a start it accepts finds the rest of
/// the process running.
fn in_start_order(roles: &[Role]) -> Vec<Role> {
    let rank = |role: &Role| match role {
        Role::Activity => 0,
        Role::Relay | Role::Timer => 1,
        Role::Workflow => 2,
        Role::Api => 3,
    };
    let mut ordered = roles.to_vec();
    ordered.sort_by_key(rank);
    ordered
}

/// Runs `roles` until `shutdown` turns true.
pub async fn run(
    config: Config,
    roles: &[Role],
    shutdown: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let process = Process::connect(config, roles, shutdown).await?;
    // The checkpointer signs the heads this process writes whole without reading them
    // back: they are remembered from the first step on, before any role starts.
    if roles.contains(&Role::Relay) && process.audit_key.is_some() {
        process.journal.witnessed.enable();
    }
    let mut running = Running::default();
    let (api, others): (Vec<Role>, Vec<Role>) = in_start_order(roles)
        .into_iter()
        .partition(|role| *role == Role::Api);
    for role in others {
        process.start(role, &mut running).await?;
    }
    running.spawn(
        "published-marks",
        process
            .journal
            .clone()
            .mark_published_until(process.shutdown.clone()),
    );
    if let Some(addr) = process.config.metrics_addr {
        let probes = EventStore::connect(process.config.database_url.expose(), 1)
            .await
            .context("connecting to Postgres for the readiness probe")?;
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("binding the operators' endpoint to {addr}"))?;
        running.spawn(
            "metrics",
            crate::runtime::ops_http::serve(
                listener,
                process.journal.metrics.clone(),
                crate::runtime::ops_http::Readiness {
                    store: probes,
                    js: process.js.clone(),
                    tasks_stream: process.subjects.stream(StreamRole::Tasks),
                },
                process.shutdown.clone(),
            ),
        );
    }
    if let Some(keys) = process.intake.seal_keys.clone() {
        running.spawn(
            "key-reload",
            key_reload::reload_on_change(
                keys,
                process.config.key_files.clone(),
                process.config.input_digest_key.clone(),
                process.journal.store.clone(),
                process.config.key_reload_every,
                process.shutdown.clone(),
            ),
        );
    }
    // Once the API answers, every other role runs and the operators' endpoint listens.
    for role in api {
        process.start(role, &mut running).await?;
    }
    let labels: Vec<String> = roles.iter().map(Role::to_string).collect();
    tracing::info!(roles = labels.join(","), prefix = process.subjects.prefix(), nats = %process.config.nats.url, "hcpflow running");

    let failure = running.until_stopped(process.shutdown.clone()).await;
    // Starts answered before their messages were acknowledged: theirs are published
    // (and their activities handed over) before the last marks are written.
    if !process
        .journal
        .background_publishes_done(FINAL_FLUSH_WAIT)
        .await
    {
        tracing::warn!("starts' messages were still being published after {FINAL_FLUSH_WAIT:?}; the relay and the sweeper will");
    }
    // Events still waiting for their batch go now, so that their marks are written
    // below (what NATS does not take in time is the relay's).
    if !process.journal.events.drained(FINAL_FLUSH_WAIT).await {
        tracing::warn!(
            "appended events were still being published after {FINAL_FLUSH_WAIT:?}; the relay will"
        );
    }
    // Marks not written are only work for the relay: a stop does not wait on a
    // Postgres that is away.
    if tokio::time::timeout(FINAL_FLUSH_WAIT, process.journal.flush_published())
        .await
        .is_err()
    {
        tracing::warn!("Postgres did not take the last published marks within {FINAL_FLUSH_WAIT:?}; the relay will");
    }
    // What the client still buffers goes out now, if NATS is there to take it: a stop
    // does not wait on a NATS that is away (what was not sent is in Postgres, and the
    // relay and the sweeper send it).
    match tokio::time::timeout(FINAL_FLUSH_WAIT, process.client.flush()).await {
        Ok(_) => {}
        Err(_) => tracing::warn!(
            "NATS did not take the last messages within {FINAL_FLUSH_WAIT:?}; stopping without them"
        ),
    }
    match failure {
        Some(error) => Err(error),
        None => {
            tracing::info!("hcpflow stopped");
            Ok(())
        }
    }
}

/// What every role of a process shares: the connections, the journal, intake and the
/// activities this process serves.
struct Process {
    config: Config,
    subjects: Subjects,
    client: async_nats::Client,
    js: jetstream::Context,
    journal: Arc<Journal>,
    intake: Arc<Intake>,
    activities: ActivityRegistry,
    audit_key: Option<Arc<AuditSigningKey>>,
    /// `<host>-<pid>`: names this process's claims and leases.
    name: String,
    shutdown: watch::Receiver<bool>,
}

impl Process {
    /// Migrates (with an admin URL), connects to Postgres and NATS, ensures the streams,
    /// and builds the catalog — the AWS and Kubernetes clients only where activities run.
    async fn connect(
        config: Config,
        roles: &[Role],
        shutdown: watch::Receiver<bool>,
    ) -> anyhow::Result<Self> {
        let subjects = Subjects::new(&config.prefix)?;
        let pool_size = config
            .database_pool_size
            .unwrap_or_else(|| default_pool_size(&config, roles));
        // Steps of different workflows that are ready together share a statement and a
        // commit (group commit), written on the writers' own connections: the pool
        // size counts them.
        let writers = hcpflow_eventstore::group::DEFAULT_WRITERS;
        // Before anything connects: a refused size migrates nothing either.
        check_pool_size(pool_size, roles, writers)?;
        if let Some(admin) = &config.database_admin_url {
            migrate::database(admin.expose(), Some(config.database_url.expose())).await?;
        }
        let store =
            EventStore::connect_with_group_commit(config.database_url.expose(), pool_size, writers)
                .await
                .context("connecting to Postgres")?;
        if config.database_admin_url.is_none() {
            wait_for_schema(&store, shutdown.clone()).await?;
        }
        let client = hcpflow_protocol::connect(&config.nats, "hcpflow").await?;
        let js = jetstream::new(client.clone());
        // Migrating (given the owner's URL) includes the streams; otherwise they must
        // be there: a runtime process creates none.
        if config.database_admin_url.is_some() {
            nats::ensure_streams(&js, &subjects, config.stream_limits).await?;
        } else {
            nats::verify_streams(&js, &subjects).await?;
        }
        let seal_keys = match &config.seal_key {
            Some(key) => {
                let keyring = key_reload::keyring(key, config.input_digest_key.as_ref())?;
                check_seal_keys(&store, &keyring)
                    .await
                    .context("HCPFLOW_SEAL_KEY")?;
                Some(Arc::new(SealKeys::new(keyring)))
            }
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
            let aws = Arc::new(AwsActivities::with_accounts(
                AwsClients::connect(&config.aws).await,
                config.aws_accounts.clone(),
                seal_keys.clone(),
            ));
            let secret_refs = |kube| SecretRefs {
                store: Arc::new(store.clone()),
                policy: config.secret_refs.clone(),
                kube,
                aws: aws.clients.clone(),
            };
            let kube = connect_kube(&config.kube, seal_keys.clone(), secret_refs).await?;
            (Some(aws), kube)
        } else {
            (None, None)
        };
        let (catalog, mut activities) = catalog::build(aws, kube, config.builtin_workflows)?;
        registry_activities::register_all(&mut activities, Arc::new(store.clone()));
        let catalog = catalog.shared();
        // Steps run workflow code in-line where this process has the workflow role, and
        // where it runs activities: an outcome is recorded with the workflow's next
        // commands in one write, and the next activity runs here at once (eager), rather
        // than a wake-up through NATS and a second write by a workflow worker. The code
        // is pure: it needs none of the workflow role's rights.
        // Only the workflow role blocks a workflow whose history the code does not
        // replay: it is the role that retries blocked workflows when new code starts.
        let runs_workflows = roles.contains(&Role::Workflow) || roles.contains(&Role::Activity);
        let journal = Journal::new(
            store,
            js.clone(),
            subjects.clone(),
            Arc::new(Metrics::default()),
            runs_workflows.then(|| catalog.clone()),
        );
        let journal = Arc::new(if roles.contains(&Role::Workflow) {
            journal
        } else {
            journal.handing_divergence_over()
        });
        let intake = Arc::new(Intake {
            journal: journal.clone(),
            catalog,
            seal_keys,
            admission: config.admission.clone(),
            secret_refs: config.secret_refs.clone(),
            aws_accounts: config.aws_accounts.clone(),
        });
        Ok(Self {
            name: format!("{}-{}", hostname(), std::process::id()),
            config,
            subjects,
            client,
            js,
            journal,
            intake,
            activities,
            audit_key,
            shutdown,
        })
    }

    async fn start(&self, role: Role, running: &mut Running) -> anyhow::Result<()> {
        match role {
            Role::Api => self.start_api(running).await,
            Role::Workflow => self.start_workflow(running).await,
            Role::Activity => self.start_activity(running).await,
            Role::Relay => {
                self.start_relay(running);
                Ok(())
            }
            Role::Timer => {
                let timers = TimerService {
                    journal: self.journal.clone(),
                    name: format!("timer-{}", self.name),
                };
                running.spawn("timer", timers.run(self.shutdown.clone()));
                Ok(())
            }
        }
    }

    /// The request/reply API and the submit stream's consumer.
    async fn start_api(&self, running: &mut Running) -> anyhow::Result<()> {
        let api = Arc::new(Api {
            intake: self.intake.clone(),
            client: self.client.clone(),
            max_body_bytes: self.config.max_body_bytes,
            max_signal_bytes: self.config.max_signal_bytes,
            audit_public_key: self.audit_key.as_ref().map(|k| *k.public_key()),
            queue: RequestQueue::new(self.config.api_queue),
        });
        running.spawn("api", api.run(self.shutdown.clone()));
        for intake in intake_consumers(&self.subjects) {
            let consumer = durable_consumer(
                &self.js,
                &self.subjects.stream(intake.stream),
                intake.durable,
                intake.filter,
            )
            .await?;
            let submissions = Submissions {
                intake: self.intake.clone(),
                source: intake.source,
                max_body_bytes: self.config.max_body_bytes,
                retry_for: self.config.submit_retry_for,
            };
            running.spawn(
                intake.durable,
                submissions.run(consumer, self.shutdown.clone()),
            );
        }
        Ok(())
    }

    /// The workflow worker and the sweeper.
    async fn start_workflow(&self, running: &mut Running) -> anyhow::Result<()> {
        let consumer = durable_consumer(
            &self.js,
            &self.subjects.stream(StreamRole::Tasks),
            nats::WORKFLOW_CONSUMER,
            self.subjects.workflow_tasks(),
        )
        .await?;
        let worker = WorkflowWorker::new(self.journal.clone(), self.config.workflow_concurrency);
        running.spawn("workflow", worker.run(consumer, self.shutdown.clone()));
        let sweeper = Sweeper {
            journal: self.journal.clone(),
            idle: Duration::from_secs(60),
            every: Duration::from_secs(15),
        };
        running.spawn("sweeper", sweeper.run(self.shutdown.clone()));
        Ok(())
    }

    /// One activity worker per task queue, each with its slots, and eager dispatch to
    /// them from this process's steps.
    async fn start_activity(&self, running: &mut Running) -> anyhow::Result<()> {
        let activities = Arc::new(self.activities.clone());
        let mut eager = EagerDispatch::new(format!("eager-{}", self.name));
        for queue in &self.config.task_queues {
            let consumer = durable_consumer(
                &self.js,
                &self.subjects.stream(StreamRole::Tasks),
                &nats::activity_consumer(queue),
                self.subjects.activity_tasks(queue),
            )
            .await?;
            let slots = Arc::new(Semaphore::new(self.config.activity_concurrency));
            let local = eager.serve(queue, slots.clone(), self.config.activity_backlog_bytes);
            let worker = Arc::new(ActivityWorker {
                journal: self.journal.clone(),
                activities: activities.clone(),
                concurrency: self.config.activity_concurrency,
                slots,
                runners: Runners::new(format!("{}-{queue}", self.name)),
                backlog_wait: self.config.activity_backlog_wait,
            });
            running.spawn(
                format!("activity-{queue}"),
                worker.run(consumer, local, self.shutdown.clone()),
            );
        }
        self.journal.enable_eager_dispatch(eager);
        Ok(())
    }

    /// The outbox relay, and the checkpointer when there is an audit key.
    fn start_relay(&self, running: &mut Running) {
        let relay = Relay {
            journal: self.journal.clone(),
            name: format!("relay-{}", self.name),
            retention: self.config.done_retention,
        };
        running.spawn("relay", relay.run(self.shutdown.clone()));
        match &self.audit_key {
            Some(key) => {
                let checkpointer = Checkpointer {
                    journal: self.journal.clone(),
                    key: key.clone(),
                    name: format!("checkpointer-{}", self.name),
                    live_every: self.config.checkpoint_every,
                };
                running.spawn("checkpointer", checkpointer.run(self.shutdown.clone()));
            }
            None => tracing::warn!(
                "no audit signing key (HCPFLOW_AUDIT_SIGNING_KEY): histories are hash-chained but not signed"
            ),
        }
    }
}

/// The running roles of a process, each a task with its label.
#[derive(Default)]
struct Running(JoinSet<(String, anyhow::Result<()>)>);

impl Running {
    fn spawn(
        &mut self,
        label: impl Into<String>,
        task: impl std::future::Future<Output = anyhow::Result<()>> + Send + 'static,
    ) {
        let label = label.into();
        self.0.spawn(async move { (label, task.await) });
    }

    /// Waits until every role stopped; the first failure (or panic) stops the others
    /// and is returned. Once `shutdown` turns true the roles have [`STOP_GRACE`] to
    /// finish what they hold; then they are aborted (a role waiting on a Postgres or
    /// NATS that is gone would keep the process for ever).
    async fn until_stopped(mut self, mut shutdown: watch::Receiver<bool>) -> Option<anyhow::Error> {
        let mut failure = None;
        let grace = async move {
            if shutdown.wait_for(|stopping| *stopping).await.is_err() {
                std::future::pending::<()>().await;
            }
            tokio::time::sleep(STOP_GRACE).await;
        };
        tokio::pin!(grace);
        let mut aborted = false;
        loop {
            let joined = tokio::select! {
                joined = self.0.join_next() => joined,
                () = &mut grace, if !aborted => {
                    aborted = true;
                    let left = self.0.len();
                    tracing::warn!(left, "roles still busy {STOP_GRACE:?} after the stop; stopping them (their tasks go back to NATS, their claims lapse)");
                    self.0.abort_all();
                    continue;
                }
            };
            let Some(joined) = joined else {
                break;
            };
            match joined {
                Ok((label, Ok(()))) => tracing::debug!(label, "stopped"),
                Ok((label, Err(error))) => {
                    tracing::error!(label, %error, "a role failed; shutting down");
                    failure.get_or_insert(anyhow::anyhow!("{label}: {error:#}"));
                    self.0.abort_all();
                }
                Err(error) if error.is_cancelled() => {}
                Err(error) => {
                    failure.get_or_insert(anyhow::anyhow!("a role panicked: {error}"));
                    self.0.abort_all();
                }
            }
        }
        failure
    }
}

/// Postgres connections a process needs for its roles: one per workflow task in flight
/// where workflows run, one per two activity attempts where activities run (an attempt
/// takes one only to record what it did), and eight for the group-commit writers,
/// the relay, the timers and the API. Sized by role, several processes of a split
/// deployment fit in one Postgres's `max_connections`.
fn default_pool_size(config: &Config, roles: &[Role]) -> u32 {
    let mut size = 8;
    if roles.contains(&Role::Workflow) {
        size += config.workflow_concurrency;
    }
    if roles.contains(&Role::Activity) {
        size += config.activity_concurrency / 2;
    }
    u32::try_from(size).unwrap_or(u32::MAX).min(96)
}

/// Connections the work of any roles needs, beyond those held for good. With one,
/// everything waits its turn for it (measured at M=10 C=16 with every role: a quarter
/// fewer steps a second than with two); with none, nothing is ever answered.
const WORKING_CONNECTIONS: u32 = 1;

/// The connections `roles` hold for as long as the process runs, and by whom: the
/// group-commit writers' own, and a LISTEN connection each for the relay and the timer
/// service.
fn held_connections(roles: &[Role], writers: usize) -> Vec<(u32, &'static str)> {
    let writers = u32::try_from(writers.max(1)).unwrap_or(u32::MAX);
    let mut held = vec![(writers, "the group-commit writers")];
    if roles.contains(&Role::Relay) {
        held.push((1, "the relay's LISTEN"));
    }
    if roles.contains(&Role::Timer) {
        held.push((1, "the timer service's LISTEN"));
    }
    held
}

/// Refuses a pool too small for `roles`: with every connection held, the API, the
/// steps and the timers would wait for one that never comes.
fn check_pool_size(pool_size: u32, roles: &[Role], writers: usize) -> anyhow::Result<()> {
    let held = held_connections(roles, writers);
    let least = held.iter().map(|(n, _)| n).sum::<u32>() + WORKING_CONNECTIONS;
    if pool_size < least {
        let names: Vec<String> = roles.iter().map(ToString::to_string).collect();
        let holders: Vec<String> = held.iter().map(|(n, by)| format!("{n} by {by}")).collect();
        anyhow::bail!(
            "database_pool_size {pool_size} is too small for the roles {}: connections held for good ({}) leave none for the work; give at least {least}, better {} (--database-pool-size, HCPFLOW_DATABASE_POOL_SIZE), or leave it unset to size it by the roles",
            names.join(","),
            holders.join(", "),
            least + 1
        );
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::{check_pool_size, in_start_order, Role};

    #[test]
    fn a_pool_the_roles_would_starve_is_refused() {
        let all = Role::ALL;
        let error = check_pool_size(4, &all, 2).unwrap_err().to_string();
        assert!(error.contains("at least 5"), "{error}");
        assert!(
            error.contains("api,workflow,activity,relay,timer"),
            "{error}"
        );
        assert!(error.contains("1 by the timer service's LISTEN"), "{error}");
        assert!(check_pool_size(5, &all, 2).is_ok());
        assert!(check_pool_size(5, &all, 3).is_err());
        // Without the relay and the timers, nothing listens: the writers hold two.
        assert!(check_pool_size(3, &[Role::Api], 2).is_ok());
        assert!(check_pool_size(2, &[Role::Activity], 2).is_err());
        // Only the holders there are named.
        let error = check_pool_size(3, &[Role::Relay], 2)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("(2 by the group-commit writers, 1 by the relay's LISTEN)"),
            "{error}"
        );
        assert!(!error.contains("timer"), "{error}");
    }

    #[test]
    fn roles_that_take_work_start_after_eager_dispatch() {
        let all = [
            Role::Api,
            Role::Workflow,
            Role::Activity,
            Role::Relay,
            Role::Timer,
        ];
        let ordered = in_start_order(&all);
        assert_eq!(ordered.len(), all.len());
        assert_eq!(ordered.first(), Some(&Role::Activity));
        assert_eq!(ordered.last(), Some(&Role::Api));
        assert_eq!(
            in_start_order(&[Role::Api, Role::Workflow]),
            [Role::Workflow, Role::Api]
        );
    }
}
