//! NATS authentication and TLS: a server and its clients on a private NATS that requires
//! a token, a user and password, or TLS with a private certificate authority.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::json;

use crate::support::{env_value, free_port, stack, unique, Server};

/// A private nats-server with JetStream, stopped (and its store removed) on drop.
pub(crate) struct PrivateNats {
    child: tokio::process::Child,
    pub url: String,
    dir: PathBuf,
}

impl PrivateNats {
    /// Starts it with `args`; ready once `options()` connects.
    async fn start(
        env: &[(String, String)],
        dir: PathBuf,
        scheme: &str,
        args: &[&str],
        options: impl Fn() -> async_nats::ConnectOptions,
    ) -> PrivateNats {
        Self::start_with_env(env, dir, scheme, args, &[], options).await
    }

    /// As `start`, with `server_env` in nats-server's environment (the passwords its
    /// configuration names).
    pub(crate) async fn start_with_env(
        env: &[(String, String)],
        dir: PathBuf,
        scheme: &str,
        args: &[&str],
        server_env: &[(String, String)],
        options: impl Fn() -> async_nats::ConnectOptions,
    ) -> PrivateNats {
        hcpflow_workers::runtime::tls::install_crypto_provider();
        let nats_server = env_value(env, "HCPFLOW_DEV_NATS_SERVER");
        assert!(
            !nats_server.is_empty(),
            "HCPFLOW_DEV_NATS_SERVER missing from .dev/env"
        );
        let port = free_port();
        let child = tokio::process::Command::new(&nats_server)
            .args(["-a", "127.0.0.1", "-p", &port.to_string(), "-js", "-sd"])
            .arg(dir.join("store"))
            .args(args)
            .envs(server_env.iter().cloned())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start a private nats-server");
        let url = format!("{scheme}://127.0.0.1:{port}");
        for _ in 0..100 {
            if options().connect(url.as_str()).await.is_ok() {
                return PrivateNats { child, url, dir };
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("the private nats-server did not start");
    }

    /// Whether a client with `options` is refused.
    async fn refuses(&self, options: async_nats::ConnectOptions) -> bool {
        let attempt =
            tokio::time::timeout(Duration::from_secs(5), options.connect(self.url.as_str())).await;
        !matches!(attempt, Ok(Ok(_)))
    }
}

impl Drop for PrivateNats {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs a `noop_chain` through a server configured by `settings` on `nats`.
async fn a_workflow_runs(
    mut env: Vec<(String, String)>,
    nats: &PrivateNats,
    settings: &[(&str, &str)],
    client: async_nats::Client,
) {
    env.retain(|(k, _)| k != "HCPFLOW_NATS_URL");
    env.push(("HCPFLOW_NATS_URL".into(), nats.url.clone()));
    for (key, value) in settings {
        env.push(((*key).into(), (*value).into()));
    }
    let prefix = unique("auth");
    let server = Server::start_with_client(env, &prefix, &[], client).await;
    let id = format!("{prefix}-w");
    let reply = server
        .start_workflow("noop_chain", &id, json!({"steps": 2}))
        .await;
    assert_eq!(reply["ok"], true, "{reply}");
    assert_eq!(
        server.wait_terminal(&id, Duration::from_secs(30)).await,
        "completed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_protected_nats_works_with_the_token() {
    let Some(env) = stack("a_token_protected_nats_works_with_the_token") else {
        return;
    };
    let _stack = crate::support::shared().await;
    let token = "s3cret-token";
    let options = || async_nats::ConnectOptions::with_token(token.into());
    let dir = std::env::temp_dir().join(unique("nats-token"));
    let nats = PrivateNats::start(&env, dir, "nats", &["--auth", token], options).await;
    assert!(
        nats.refuses(async_nats::ConnectOptions::new()).await,
        "connected without the token"
    );
    let client = options().connect(nats.url.as_str()).await.unwrap();
    a_workflow_runs(env, &nats, &[("HCPFLOW_NATS_TOKEN", token)], client).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_protected_nats_works_with_user_and_password() {
    let Some(env) = stack("a_password_protected_nats_works_with_user_and_password") else {
        return;
    };
    let _stack = crate::support::shared().await;
    let (user, password) = ("hcpflow", "pa55-word");
    let options =
        || async_nats::ConnectOptions::with_user_and_password(user.into(), password.into());
    let dir = std::env::temp_dir().join(unique("nats-user"));
    let args = ["--user", user, "--pass", password];
    let nats = PrivateNats::start(&env, dir, "nats", &args, options).await;
    assert!(
        nats.refuses(async_nats::ConnectOptions::with_user_and_password(
            user.into(),
            "wrong".into()
        ))
        .await,
        "connected with a wrong password"
    );
    let client = options().connect(nats.url.as_str()).await.unwrap();
    let settings = [
        ("HCPFLOW_NATS_USER", user),
        ("HCPFLOW_NATS_PASSWORD", password),
    ];
    a_workflow_runs(env, &nats, &settings, client).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_nats_works_with_the_ca_file_and_not_without() {
    let Some(env) = stack("a_tls_nats_works_with_the_ca_file_and_not_without") else {
        return;
    };
    let _stack = crate::support::shared().await;
    let dir = std::env::temp_dir().join(unique("nats-tls"));
    std::fs::create_dir_all(&dir).unwrap();
    let ca = make_certificates(&dir);
    let cert = dir.join("server.pem").display().to_string();
    let key = dir.join("server-key.pem").display().to_string();
    let options = || {
        async_nats::ConnectOptions::new()
            .add_root_certificates(ca.clone())
            .require_tls(true)
    };
    let args = ["--tls", "--tlscert", &cert, "--tlskey", &key];
    let nats = PrivateNats::start(&env, dir.clone(), "tls", &args, options).await;

    // Without our CA, hcpflow does not trust the server, and says so.
    let mut without_ca = std::process::Command::new(env!("CARGO_BIN_EXE_hcpflow"));
    without_ca
        .arg("migrate")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs(env.iter().filter(|(k, _)| k != "HCPFLOW_NATS_URL").cloned())
        .env("HCPFLOW_NATS_URL", &nats.url)
        .env("HCPFLOW_LOG", "error");
    let refused = tokio::task::spawn_blocking(move || without_ca.output())
        .await
        .unwrap()
        .unwrap();
    assert!(!refused.status.success(), "connected without the CA");
    let said = String::from_utf8_lossy(&refused.stderr).to_lowercase();
    assert!(
        said.contains("nats") && (said.contains("tls") || said.contains("certificate")),
        "unclear error without the CA: {said}"
    );

    let client = options().connect(nats.url.as_str()).await.unwrap();
    let ca_file = ca.display().to_string();
    a_workflow_runs(env, &nats, &[("HCPFLOW_NATS_CA_FILE", &ca_file)], client).await;
}

/// A private CA and a server certificate for 127.0.0.1 signed by it, made with the
/// `openssl` command (the dev stack installs it). Returns the CA certificate's path.
fn make_certificates(dir: &Path) -> PathBuf {
    let openssl = |args: &[&str]| {
        let output = std::process::Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("run openssl (make dev-up installs it)");
        assert!(
            output.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    };
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "2",
        "-subj",
        "/CN=hcpflow test CA",
        "-keyout",
        "ca-key.pem",
        "-out",
        "ca.pem",
    ]);
    openssl(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=127.0.0.1",
        "-keyout",
        "server-key.pem",
        "-out",
        "server.csr",
    ]);
    std::fs::write(
        dir.join("server.ext"),
        "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    openssl(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca-key.pem",
        "-CAcreateserial",
        "-days",
        "2",
        "-extfile",
        "server.ext",
        "-out",
        "server.pem",
    ]);
    dir.join("ca.pem")
}
