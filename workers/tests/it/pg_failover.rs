//! Postgres failover: a durable primary with a synchronous standby
//! (`deploy/dev/pg-pair.sh`), reached through one address that moves to whichever
//! server is the primary — what a managed database's endpoint or CloudNativePG's `-rw`
//! Service does, here a TCP forwarder. An engine process (api, workflow, relay, timer)
//! and an activity process run noop chains; mid-run the primary is lost (SIGKILL to all
//! its processes), the standby is promoted and the address moves to it. Every event
//! committed before the loss is on the new primary, byte for byte; the processes carry
//! on without a restart; every workflow completes with each step recorded once.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use sqlx::Row;
use tokio::net::{TcpListener, TcpStream};

use crate::scale_out::assert_each_step_recorded_once;
use crate::support::{env_value, say, shared, stack, unique, Scratch, Server};

const WAVE: usize = 20;
const STEPS: u64 = 8;

/// The primary and its synchronous standby, run by `deploy/dev/pg-pair.sh`.
struct PgPair {
    script: PathBuf,
    dir: PathBuf,
    env: Vec<(String, String)>,
    settings: BTreeMap<String, String>,
}

impl PgPair {
    async fn up(env: &[(String, String)], dir: &Path) -> PgPair {
        let crate_dir = std::env::var("CARGO_MANIFEST_DIR")
            .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_owned());
        let mut pair = PgPair {
            script: PathBuf::from(format!("{crate_dir}/../deploy/dev/pg-pair.sh")),
            dir: dir.to_owned(),
            env: env.to_vec(),
            settings: BTreeMap::new(),
        };
        pair.run("up").await;
        let text = std::fs::read_to_string(dir.join("env")).unwrap();
        pair.settings = text
            .lines()
            .filter_map(|line| line.split_once('='))
            .map(|(key, value)| (key.to_owned(), value.to_owned()))
            .collect();
        pair
    }

    async fn run(&self, command: &str) {
        let status = tokio::process::Command::new("bash")
            .arg(&self.script)
            .arg(command)
            .arg(&self.dir)
            .envs(self.env.iter().cloned())
            .status()
            .await
            .expect("run pg-pair.sh");
        assert!(status.success(), "pg-pair.sh {command} failed");
    }

    fn setting(&self, key: &str) -> &str {
        &self.settings[key]
    }

    fn port(&self, key: &str) -> u16 {
        self.setting(key).parse().unwrap()
    }

    /// The superuser's URL at `port` (checks, straight to one server).
    fn superuser_url(&self, port: u16) -> String {
        format!(
            "postgres://postgres:{}@127.0.0.1:{port}/hcpflow",
            self.setting("SUPERUSER_PASSWORD")
        )
    }
}

impl Drop for PgPair {
    fn drop(&mut self) {
        let _ = std::process::Command::new("bash")
            .arg(&self.script)
            .arg("down")
            .arg(&self.dir)
            .envs(self.env.iter().cloned())
            .status();
    }
}

/// One address for the database that forwards each new connection to the port of the
/// primary of the moment. Connections to a lost primary end with it.
struct Endpoint {
    port: u16,
    target: Arc<AtomicU16>,
    task: tokio::task::JoinHandle<()>,
}

impl Endpoint {
    async fn start(target: u16) -> Endpoint {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let target = Arc::new(AtomicU16::new(target));
        let current = target.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let port = current.load(Ordering::SeqCst);
                tokio::spawn(async move {
                    if let Ok(mut outbound) = TcpStream::connect(("127.0.0.1", port)).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
        });
        Endpoint { port, target, task }
    }

    fn move_to(&self, port: u16) {
        self.target.store(port, Ordering::SeqCst);
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What the database at `url` holds: every event, (workflow, seq) → hash, and how many
/// workflows are still running.
async fn committed(url: &str) -> (BTreeMap<(String, i64), Vec<u8>>, i64) {
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect(url)
        .await
        .unwrap();
    let mut snapshot = pool.begin().await.unwrap();
    sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        .execute(&mut *snapshot)
        .await
        .unwrap();
    let rows = sqlx::query("SELECT workflow_id, seq, hash FROM events")
        .fetch_all(&mut *snapshot)
        .await
        .unwrap();
    let running: i64 =
        sqlx::query_scalar("SELECT count(*) FROM workflows WHERE status NOT IN ('completed')")
            .fetch_one(&mut *snapshot)
            .await
            .unwrap();
    drop(snapshot);
    pool.close().await;
    let events = rows
        .into_iter()
        .map(|row| ((row.get(0), row.get(1)), row.get(2)))
        .collect();
    (events, running)
}

/// Starts a wave of chains; a start the API answers with an error is sent again (the
/// same workflow id: safe), as a client does while the database changes hands.
async fn start_wave(api: &Server, ids: &mut Vec<String>, wave: usize) {
    for n in 0..WAVE {
        let id = format!("{}-w{wave}-{n}", api.prefix);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            let reply = api
                .start_workflow("noop_chain", &id, json!({"steps": STEPS, "sleep_ms": 200}))
                .await;
            if reply["ok"] == true {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "start {id} in wave {wave}: {reply}"
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        ids.push(id);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workflows_survive_a_postgres_failover() {
    let Some(env) = stack("workflows_survive_a_postgres_failover") else {
        return;
    };
    let _shared = shared().await;
    let scratch = Scratch(std::env::temp_dir().join(unique("pg-pair")));
    let pair = PgPair::up(&env, &scratch.0).await;
    let endpoint = Endpoint::start(pair.port("PRIMARY_PORT")).await;
    let url = |user: &str, password: &str| {
        format!(
            "postgres://{user}:{}@127.0.0.1:{}/hcpflow",
            pair.setting(password),
            endpoint.port
        )
    };
    let mut env = env;
    env.retain(|(key, _)| !key.starts_with("HCPFLOW_DATABASE_"));
    env.push((
        "HCPFLOW_DATABASE_URL".into(),
        url("hcpflow_app", "APP_PASSWORD"),
    ));
    env.push((
        "HCPFLOW_DATABASE_ADMIN_URL".into(),
        url("hcpflow_owner", "OWNER_PASSWORD"),
    ));
    assert!(!env_value(&env, "HCPFLOW_NATS_URL").is_empty());
    let prefix = unique("pgfail");
    let engine = Server::start_worker(env.clone(), &prefix, "api,workflow,relay,timer", &[]).await;
    let activity = Server::start_worker(env.clone(), &prefix, "activity", &[]).await;

    let mut ids = Vec::new();
    start_wave(&engine, &mut ids, 1).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // What the primary had committed just before it is lost: with a synchronous standby,
    // a commit is acknowledged only once the standby has it.
    let (before, running) = committed(&pair.superuser_url(pair.port("PRIMARY_PORT"))).await;
    assert!(running > 0, "the primary is lost mid-run");
    pair.run("promote").await;
    endpoint.move_to(pair.port("STANDBY_PORT"));
    say(&format!(
        "postgres failover: {} events committed, {running} workflows running when the primary was lost",
        before.len()
    ));
    start_wave(&engine, &mut ids, 2).await;

    for id in &ids {
        let status = engine.wait_terminal(id, Duration::from_secs(180)).await;
        assert_eq!(status, "completed", "{id}");
        assert_each_step_recorded_once(&engine, id, STEPS).await;
    }
    let (after, _) = committed(&pair.superuser_url(pair.port("STANDBY_PORT"))).await;
    let missing: Vec<_> = before
        .iter()
        .filter(|(key, hash)| after.get(*key) != Some(*hash))
        .map(|(key, _)| key)
        .collect();
    assert!(
        missing.is_empty(),
        "{} events committed on the lost primary are not on the new one, e.g. {:?}",
        missing.len(),
        missing.first()
    );
    let mut engine = engine;
    let mut activity = activity;
    activity.stop().await;
    engine.stop().await;
}
