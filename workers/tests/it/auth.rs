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
    pub(crate) async fn start(
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
    // A client certificate, for a server that verifies its clients.
    openssl(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=hcpflow test client",
        "-keyout",
        "client-key.pem",
        "-out",
        "client.csr",
    ]);
    std::fs::write(dir.join("client.ext"), "extendedKeyUsage=clientAuth\n").unwrap();
    openssl(&[
        "x509",
        "-req",
        "-in",
        "client.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca-key.pem",
        "-CAcreateserial",
        "-days",
        "2",
        "-extfile",
        "client.ext",
        "-out",
        "client.pem",
    ]);
    dir.join("ca.pem")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nats_that_verifies_client_certificates_works_with_one_and_not_without() {
    let Some(env) =
        stack("a_nats_that_verifies_client_certificates_works_with_one_and_not_without")
    else {
        return;
    };
    let _stack = crate::support::shared().await;
    let dir = std::env::temp_dir().join(unique("nats-mtls"));
    std::fs::create_dir_all(&dir).unwrap();
    let ca = make_certificates(&dir);
    let path = |name: &str| dir.join(name).display().to_string();
    let (cert, key) = (path("client.pem"), path("client-key.pem"));
    let with_ca = || {
        async_nats::ConnectOptions::new()
            .add_root_certificates(ca.clone())
            .require_tls(true)
    };
    let options = || with_ca().add_client_certificate(cert.clone().into(), key.clone().into());
    let (server_cert, server_key, ca_file) =
        (path("server.pem"), path("server-key.pem"), path("ca.pem"));
    let args = [
        "--tls",
        "--tlscert",
        &server_cert,
        "--tlskey",
        &server_key,
        "--tlsverify",
        "--tlscacert",
        &ca_file,
    ];
    let nats = PrivateNats::start(&env, dir.clone(), "tls", &args, options).await;
    assert!(
        nats.refuses(with_ca()).await,
        "connected without a client certificate"
    );
    let client = options().connect(nats.url.as_str()).await.unwrap();
    let settings = [
        ("HCPFLOW_NATS_CA_FILE", ca_file.as_str()),
        ("HCPFLOW_NATS_TLS_CERT", cert.as_str()),
        ("HCPFLOW_NATS_TLS_KEY", key.as_str()),
    ];
    a_workflow_runs(env, &nats, &settings, client).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_nkey_nats_works_with_the_seed_and_not_without() {
    let Some(env) = stack("an_nkey_nats_works_with_the_seed_and_not_without") else {
        return;
    };
    let _stack = crate::support::shared().await;
    let dir = std::env::temp_dir().join(unique("nats-nkey"));
    std::fs::create_dir_all(&dir).unwrap();
    let user = nkeys::KeyPair::new_user();
    let seed = user.seed().unwrap();
    let seed_file = dir.join("user.nk");
    std::fs::write(&seed_file, format!("{seed}\n")).unwrap();
    let config = dir.join("nats.conf");
    std::fs::write(
        &config,
        format!(
            "authorization {{ users: [ {{ nkey: \"{}\" }} ] }}\n",
            user.public_key()
        ),
    )
    .unwrap();
    let options = || async_nats::ConnectOptions::new().nkey(seed.clone());
    let config_arg = config.display().to_string();
    let nats = PrivateNats::start(&env, dir.clone(), "nats", &["-c", &config_arg], options).await;
    assert!(
        nats.refuses(async_nats::ConnectOptions::new()).await,
        "connected without the nkey"
    );
    let other = nkeys::KeyPair::new_user().seed().unwrap();
    assert!(
        nats.refuses(async_nats::ConnectOptions::new().nkey(other))
            .await,
        "connected with another nkey"
    );
    let client = options().connect(nats.url.as_str()).await.unwrap();
    let seed_path = seed_file.display().to_string();
    a_workflow_runs(
        env,
        &nats,
        &[("HCPFLOW_NATS_NKEY_SEED_FILE", seed_path.as_str())],
        client,
    )
    .await;
}

/// A NATS JWT (`alg` ed25519-nkey) for `subject`, signed by `issuer`.
fn nats_jwt(issuer: &nkeys::KeyPair, subject: &str, name: &str, nats: serde_json::Value) -> String {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let header = b64.encode(json!({"typ": "JWT", "alg": "ed25519-nkey"}).to_string());
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let claims = json!({"jti": unique("jti"), "iat": now, "iss": issuer.public_key(),
                        "sub": subject, "name": name, "nats": nats});
    let signed = format!("{header}.{}", b64.encode(claims.to_string()));
    let signature = issuer.sign(signed.as_bytes()).unwrap();
    format!("{signed}.{}", b64.encode(signature))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_mode_nats_works_with_a_creds_file() {
    let Some(env) = stack("an_operator_mode_nats_works_with_a_creds_file") else {
        return;
    };
    let _stack = crate::support::shared().await;
    let dir = std::env::temp_dir().join(unique("nats-creds"));
    std::fs::create_dir_all(&dir).unwrap();
    // An operator, an account with JetStream, and a user of it: what `nsc` would make.
    let operator = nkeys::KeyPair::new_operator();
    let account = nkeys::KeyPair::new_account();
    let user = nkeys::KeyPair::new_user();
    // NATS's own account (JetStream needs one in operator mode).
    let system = nkeys::KeyPair::new_account();
    let system_jwt = nats_jwt(
        &operator,
        &system.public_key(),
        "SYS",
        json!({"type": "account", "version": 2}),
    );
    let operator_jwt = nats_jwt(
        &operator,
        &operator.public_key(),
        "hcpflow-test",
        json!({"type": "operator", "version": 2}),
    );
    let account_jwt = nats_jwt(
        &operator,
        &account.public_key(),
        "HCPFLOW",
        json!({"type": "account", "version": 2, "limits": {
            "subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1,
            "wildcards": true, "conn": -1, "leaf": -1,
            "mem_storage": -1, "disk_storage": -1, "streams": -1, "consumer": -1}}),
    );
    let user_jwt = nats_jwt(
        &account,
        &user.public_key(),
        "hcpflow",
        json!({"type": "user", "version": 2, "pub": {}, "sub": {},
               "subs": -1, "data": -1, "payload": -1}),
    );
    let config = dir.join("nats.conf");
    std::fs::write(
        &config,
        format!(
            "operator: {operator_jwt}\nsystem_account: {}\nresolver: MEMORY\n\
             resolver_preload: {{\n  {}: {account_jwt}\n  {}: {system_jwt}\n}}\n",
            system.public_key(),
            account.public_key(),
            system.public_key()
        ),
    )
    .unwrap();
    let creds = dir.join("hcpflow.creds");
    std::fs::write(
        &creds,
        format!(
            "-----BEGIN NATS USER JWT-----\n{user_jwt}\n------END NATS USER JWT------\n\n\
             -----BEGIN USER NKEY SEED-----\n{}\n------END USER NKEY SEED------\n",
            user.seed().unwrap()
        ),
    )
    .unwrap();
    let creds_path = creds.display().to_string();
    let options = || {
        futures::executor::block_on(async_nats::ConnectOptions::with_credentials_file(
            creds_path.clone(),
        ))
        .unwrap()
    };
    let config_arg = config.display().to_string();
    let nats = PrivateNats::start(&env, dir.clone(), "nats", &["-c", &config_arg], options).await;
    assert!(
        nats.refuses(async_nats::ConnectOptions::new()).await,
        "connected without credentials"
    );
    let client = options().connect(nats.url.as_str()).await.unwrap();
    a_workflow_runs(
        env,
        &nats,
        &[("HCPFLOW_NATS_CREDS_FILE", creds_path.as_str())],
        client,
    )
    .await;
}
