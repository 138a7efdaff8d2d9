//! Starting `hcpflow` processes and talking to them like any NATS client.

use std::io::Write as _;
use std::process::Stdio;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use hcpflow_eventstore::EventStore;
use serde_json::{json, Value};
use tokio::process::{Child, Command};
use tokio::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Tests share the stack; a test that restarts a server of the stack takes it alone.
static STACK: RwLock<()> = RwLock::const_new(());

pub(crate) async fn shared() -> RwLockReadGuard<'static, ()> {
    STACK.read().await
}

pub(crate) async fn exclusive() -> RwLockWriteGuard<'static, ()> {
    STACK.write().await
}

/// Restarts one server of the dev stack (`postgres` or `nats`) with the project's script.
pub(crate) async fn restart_stack_server(name: &str) {
    // The checkout under test, as cargo names it at run time (a build directory shared by
    // several checkouts may hold a binary built in another).
    let crate_dir = std::env::var("CARGO_MANIFEST_DIR")
        .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_owned());
    let script = format!("{crate_dir}/../deploy/dev/stack.sh");
    let status = Command::new("bash")
        .arg(&script)
        .arg("restart")
        .arg(name)
        .status()
        .await
        .expect("run stack.sh");
    assert!(status.success(), "restarting {name} failed");
}

pub(crate) fn say(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// The stack's settings, or `None` (with a message) when the stack is not up.
pub(crate) fn stack(test: &str) -> Option<Vec<(String, String)>> {
    let keys = [
        "HCPFLOW_DATABASE_URL",
        "HCPFLOW_DATABASE_ADMIN_URL",
        "HCPFLOW_NATS_URL",
    ];
    if keys.iter().all(|k| std::env::var(k).is_ok()) {
        let mut env: Vec<(String, String)> = std::env::vars()
            .filter(|(k, _)| k.starts_with("HCPFLOW_"))
            .collect();
        env.retain(|(k, _)| k != "HCPFLOW_REQUIRE_STACK");
        return Some(env);
    }
    if std::env::var_os("HCPFLOW_REQUIRE_STACK").is_some() {
        panic!("{test}: the dev stack's variables must be set under make test");
    }
    say(&format!(
        "skipping {test}: it needs the dev stack's Postgres and NATS; run `make test`"
    ));
    None
}

/// A directory of a test's own, removed when the test ends, however it ends.
pub(crate) struct Scratch(pub std::path::PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A prefix no other test or run uses.
pub(crate) fn unique(name: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "t{}{}{}{name}",
        std::process::id(),
        nanos % 100_000,
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// One `hcpflow server` (or `hcpflow worker`) process under test.
pub(crate) struct Server {
    pub prefix: String,
    pub env: Vec<(String, String)>,
    /// What runs `hcpflow` (its path, or a command that runs it in the image's root
    /// filesystem), then `server` or `worker --role <roles>`.
    program: Vec<String>,
    command: Vec<String>,
    extra: Vec<String>,
    /// Where the server's log goes (at debug level), instead of the test's stderr.
    log: Option<std::path::PathBuf>,
    child: Option<Child>,
    pub client: async_nats::Client,
    pub store: EventStore,
}

impl Server {
    pub(crate) async fn start(env: Vec<(String, String)>, prefix: &str, extra: &[&str]) -> Server {
        let client = async_nats::connect(env_value(&env, "HCPFLOW_NATS_URL"))
            .await
            .unwrap();
        Self::start_with_client(env, prefix, extra, client).await
    }

    /// As `start`, talking to the server through `client`.
    pub(crate) async fn start_with_client(
        env: Vec<(String, String)>,
        prefix: &str,
        extra: &[&str],
        client: async_nats::Client,
    ) -> Server {
        Self::launch(env, prefix, extra, client, None).await
    }

    /// As `start`, with `hcpflow` run by `program` (e.g. `chroot ... /usr/local/bin/hcpflow`)
    /// and its log at debug level appended to `log`.
    pub(crate) async fn start_program(
        program: Vec<String>,
        env: Vec<(String, String)>,
        prefix: &str,
        extra: &[&str],
        log: std::path::PathBuf,
    ) -> Server {
        let client = async_nats::connect(env_value(&env, "HCPFLOW_NATS_URL"))
            .await
            .unwrap();
        let command = vec!["server".to_owned()];
        Self::launch_command(env, prefix, program, command, extra, client, Some(log)).await
    }

    /// `hcpflow` as cargo built it.
    fn built() -> Vec<String> {
        vec![env!("CARGO_BIN_EXE_hcpflow").to_owned()]
    }

    /// An `hcpflow worker` of only the given roles (comma-separated), instead of a server.
    pub(crate) async fn start_worker(
        env: Vec<(String, String)>,
        prefix: &str,
        roles: &str,
        extra: &[&str],
    ) -> Server {
        let client = async_nats::connect(env_value(&env, "HCPFLOW_NATS_URL"))
            .await
            .unwrap();
        Self::start_worker_with_client(env, prefix, roles, extra, client).await
    }

    /// As `start_worker`, talking to it through `client`.
    pub(crate) async fn start_worker_with_client(
        env: Vec<(String, String)>,
        prefix: &str,
        roles: &str,
        extra: &[&str],
        client: async_nats::Client,
    ) -> Server {
        let command = vec!["worker".to_owned(), "--role".to_owned(), roles.to_owned()];
        Self::launch_command(env, prefix, Self::built(), command, extra, client, None).await
    }

    /// As `start`, with the server's log at debug level appended to `log`.
    pub(crate) async fn start_logged(
        env: Vec<(String, String)>,
        prefix: &str,
        log: std::path::PathBuf,
    ) -> Server {
        let client = async_nats::connect(env_value(&env, "HCPFLOW_NATS_URL"))
            .await
            .unwrap();
        Self::launch(env, prefix, &[], client, Some(log)).await
    }

    async fn launch(
        env: Vec<(String, String)>,
        prefix: &str,
        extra: &[&str],
        client: async_nats::Client,
        log: Option<std::path::PathBuf>,
    ) -> Server {
        let command = vec!["server".to_owned()];
        Self::launch_command(env, prefix, Self::built(), command, extra, client, log).await
    }

    async fn launch_command(
        env: Vec<(String, String)>,
        prefix: &str,
        program: Vec<String>,
        command: Vec<String>,
        extra: &[&str],
        client: async_nats::Client,
        log: Option<std::path::PathBuf>,
    ) -> Server {
        let store = EventStore::connect(&env_value(&env, "HCPFLOW_DATABASE_URL"), 4)
            .await
            .unwrap();
        let mut server = Server {
            prefix: prefix.to_owned(),
            env,
            program,
            command,
            extra: extra.iter().map(|s| (*s).to_owned()).collect(),
            log,
            child: None,
            client,
            store,
        };
        server.spawn().await;
        server
    }

    async fn spawn(&mut self) {
        let mut command = Command::new(&self.program[0]);
        command
            .args(&self.program[1..])
            .args(&self.command)
            .arg("--prefix")
            .arg(&self.prefix)
            .args(&self.extra)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HCPFLOW_LOG", "warn")
            // The tests run the built-in noop_* workflows (a test may turn them off
            // with `--builtin-workflows=false`).
            .env("HCPFLOW_BUILTIN_WORKFLOWS", "true")
            // The emulator's failure injection, and each test cluster's own namespace.
            .env("HCPFLOW_ALLOWED_ANNOTATIONS", "hcpflow.io/emulator-*")
            .env("HCPFLOW_ALLOWED_NAMESPACES", "clusters,ns-*")
            .envs(self.env.iter().cloned())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        if let Some(path) = &self.log {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .expect("server log file");
            command.env("HCPFLOW_LOG", "debug").stderr(file);
        }
        self.child = Some(command.spawn().expect("spawn hcpflow server"));
        // Ready when the API answers.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let probe = self
                .try_api("describe", json!({"workflow_id": "readiness-probe"}))
                .await;
            if probe.is_some() {
                return;
            }
            if Instant::now() >= deadline {
                let log = self.log.as_ref().map_or_else(String::new, |path| {
                    let text = std::fs::read_to_string(path).unwrap_or_default();
                    let tail: Vec<&str> = text.lines().rev().take(40).collect();
                    let tail: Vec<&str> = tail.into_iter().rev().collect();
                    format!("; the end of its log:\n{}", tail.join("\n"))
                });
                panic!(
                    "hcpflow server with prefix {} did not start{log}",
                    self.prefix
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The process id of the running server.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.as_ref().and_then(Child::id)
    }

    /// SIGKILL: no shutdown, nothing flushed.
    pub(crate) async fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.start_kill();
            let _ = child.wait().await;
        }
    }

    pub(crate) async fn restart(&mut self) {
        self.kill9().await;
        self.spawn().await;
    }

    /// SIGTERM, and wait for a clean exit.
    pub(crate) async fn stop(&mut self) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("running");
        let pid = child.id().expect("pid");
        let _ = std::process::Command::new("kill")
            .arg("-TERM")
            .arg(pid.to_string())
            .status();
        tokio::time::timeout(Duration::from_secs(60), child.wait())
            .await
            .expect("stops")
            .expect("exit status")
    }

    async fn try_api(&self, verb: &str, body: Value) -> Option<Value> {
        self.try_api_raw(verb, serde_json::to_vec(&body).unwrap())
            .await
    }

    /// The reply to one request, or `None` after 10 s without one. Sent again while no
    /// server answers the subject (none got it), as the API client does.
    pub(crate) async fn try_api_raw(&self, verb: &str, body: Vec<u8>) -> Option<Value> {
        let subject = format!("{}.api.v1.{verb}", self.prefix);
        let deadline = Instant::now() + Duration::from_secs(10);
        let reply = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let request = self.client.request(subject.clone(), body.clone().into());
            match tokio::time::timeout(left, request).await.ok()? {
                Ok(reply) => break reply,
                Err(error)
                    if error.kind() == async_nats::RequestErrorKind::NoResponders
                        && Instant::now() + Duration::from_millis(200) < deadline =>
                {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(_) => return None,
            }
        };
        serde_json::from_slice(&reply.payload).ok()
    }

    pub(crate) async fn api(&self, verb: &str, body: Value) -> Value {
        self.try_api(verb, body.clone())
            .await
            .unwrap_or_else(|| panic!("no reply to {verb} {body}"))
    }

    pub(crate) async fn start_workflow(
        &self,
        workflow_type: &str,
        id: &str,
        input: Value,
    ) -> Value {
        // A destroying type is started with the destroy verb (the admin's).
        let verb = if workflow_type == "destroy_hosted_cluster" {
            "destroy"
        } else {
            "start"
        };
        self.api(
            verb,
            json!({"workflow_type": workflow_type, "workflow_id": id, "input": input}),
        )
        .await
    }

    pub(crate) async fn status(&self, id: &str) -> String {
        let reply = self.api("describe", json!({"workflow_id": id})).await;
        reply["workflow"]["status"]
            .as_str()
            .unwrap_or("?")
            .to_owned()
    }

    /// Waits until the workflow reaches a terminal status; returns it.
    pub(crate) async fn wait_terminal(&self, id: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let status = self.status(id).await;
            if matches!(
                status.as_str(),
                "completed" | "compensated" | "cancelled" | "failed" | "blocked"
            ) {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "{id} still {status} after {timeout:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

pub(crate) fn env_value(env: &[(String, String)], key: &str) -> String {
    env.iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.clone())
        .unwrap_or_default()
}

/// A port nothing listens on right now.
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits (up to 10 s) until something listens on `addr`: a server's operators' endpoint
/// is bound before its API answers; a process without the API role gives no other sign
/// that it started.
pub(crate) async fn until_listening(addr: &str) {
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(addr).await.is_ok() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("nothing listens on {addr} after 10 s");
}

/// A minimal HTTP GET, returning status line, headers and body.
pub(crate) async fn http_get(addr: &str, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(
            format!("GET {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\r\n").as_bytes(),
        )
        .await
        .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    response
}

impl Server {
    /// The seqs of `workflow_id`'s events on the events stream, in stream order, once
    /// the stream has stopped growing for a while (the relay publishes what a crash
    /// left after its grace period).
    pub(crate) async fn events_on_stream(&self, workflow_id: &str, expected: usize) -> Vec<u64> {
        use futures::StreamExt;
        use hcpflow_protocol::subjects::{StreamRole, Subjects};

        let subjects = Subjects::new(&self.prefix).unwrap();
        let js = async_nats::jetstream::new(self.client.clone());
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let stream = js
                .get_stream(subjects.stream(StreamRole::Events))
                .await
                .unwrap();
            let consumer = stream
                .create_consumer(async_nats::jetstream::consumer::pull::OrderedConfig {
                    filter_subject: subjects
                        .events(&hcpflow_engine::TenantId::default_tenant(), workflow_id),
                    ..Default::default()
                })
                .await
                .unwrap();
            let mut messages = consumer.messages().await.unwrap();
            let mut seqs = Vec::new();
            while let Ok(Some(Ok(message))) =
                tokio::time::timeout(Duration::from_millis(500), messages.next()).await
            {
                let entry: Value = serde_json::from_slice(&message.payload).unwrap();
                seqs.push(entry["seq"].as_u64().unwrap());
            }
            if seqs.len() >= expected || Instant::now() > deadline {
                return seqs;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
}

/// The `hcpflow` binary with `args` and exactly `env` (and `PATH`): nothing else of the
/// test's own environment leaks in.
pub(crate) fn hcpflow<I, K, V>(args: &[&str], env: I) -> tokio::process::Command
where
    I: IntoIterator<Item = (K, V)>,
    K: AsRef<std::ffi::OsStr>,
    V: AsRef<std::ffi::OsStr>,
{
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_hcpflow"));
    command
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs(env);
    command
}

/// Runs the `hcpflow` command as a user would, against `server` (its NATS and prefix,
/// and the audit key to derive the public key from).
pub(crate) async fn run_cli(server: &Server, args: &[&str]) -> std::process::Output {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_hcpflow"));
    command
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env(
            "HCPFLOW_NATS_URL",
            env_value(&server.env, "HCPFLOW_NATS_URL"),
        )
        .env("HCPFLOW_PREFIX", &server.prefix);
    if let Some((_, key)) = server
        .env
        .iter()
        .find(|(k, _)| k == "HCPFLOW_AUDIT_SIGNING_KEY")
    {
        command.env("HCPFLOW_AUDIT_SIGNING_KEY", key);
    }
    command.output().await.unwrap()
}

/// stdout and stderr as text.
pub(crate) fn output_text(output: &std::process::Output) -> (String, String) {
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// stdout as JSON, after checking the command succeeded (stderr first in the failure:
/// it says why, and stdout may be long).
pub(crate) fn output_json(output: &std::process::Output) -> Value {
    let (stdout, stderr) = output_text(output);
    assert!(
        output.status.success(),
        "{}\nstderr: {stderr}\nstdout: {stdout}",
        output.status
    );
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}
