//! What deploy/compose ships: every service's secrets come as files, never in its
//! environment; only the activity service holds cloud credentials and only `migrate`
//! the owner's database credentials; the settings files make-secrets.sh writes are what
//! `hcpflow` and nats-server accept.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_yaml_ng::Value;

use crate::support::{env_value, stack, unique, Scratch};

fn compose_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/compose")
}

/// compose.yaml with its merge keys applied: the services as compose runs them.
fn compose() -> Value {
    let text = std::fs::read_to_string(compose_dir().join("compose.yaml")).unwrap();
    let mut compose: Value = serde_yaml_ng::from_str(&text).unwrap();
    compose.apply_merge().unwrap();
    compose
}

fn services(compose: &Value) -> Vec<(String, &Value)> {
    compose["services"]
        .as_mapping()
        .unwrap()
        .iter()
        .map(|(name, service)| (name.as_str().unwrap().to_owned(), service))
        .collect()
}

/// A service's environment, in either of compose's forms (a mapping, or `KEY=VALUE`
/// items).
fn environment(service: &Value) -> Vec<(String, String)> {
    let scalar = |value: &Value| match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => serde_yaml_ng::to_string(other).unwrap().trim().to_owned(),
    };
    match &service["environment"] {
        Value::Mapping(variables) => variables
            .iter()
            .map(|(k, v)| (k.as_str().unwrap().to_owned(), scalar(v)))
            .collect(),
        Value::Sequence(items) => items
            .iter()
            .map(|item| {
                let item = scalar(item);
                let (key, value) = item.split_once('=').unwrap_or((&item, ""));
                (key.to_owned(), value.to_owned())
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// A service's command line, as words.
fn command(service: &Value) -> Vec<String> {
    match &service["command"] {
        Value::Sequence(words) => words
            .iter()
            .map(|word| word.as_str().unwrap_or_default().to_owned())
            .collect(),
        Value::String(line) => line.split_whitespace().map(str::to_owned).collect(),
        _ => Vec::new(),
    }
}

/// The flags of `hcpflow` that take a secret as their value.
const SECRET_FLAGS: [&str; 7] = [
    "--database-url",
    "--database-admin-url",
    "--nats-password",
    "--nats-token",
    "--seal-key",
    "--input-digest-key",
    "--audit-signing-key",
];

/// The secrets a service mounts, by name.
fn secrets(service: &Value) -> BTreeSet<String> {
    service["secrets"]
        .as_sequence()
        .map(|secrets| {
            secrets
                .iter()
                .map(|secret| match secret {
                    Value::String(name) => name.clone(),
                    long => long["source"].as_str().unwrap().to_owned(),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Settings that are secrets when given as values (their `_FILE` forms are not).
const SECRET_SETTINGS: [&str; 10] = [
    "HCPFLOW_DATABASE_URL",
    "HCPFLOW_DATABASE_ADMIN_URL",
    "HCPFLOW_NATS_PASSWORD",
    "HCPFLOW_NATS_TOKEN",
    "HCPFLOW_SEAL_KEY",
    "HCPFLOW_INPUT_DIGEST_KEY",
    "HCPFLOW_AUDIT_SIGNING_KEY",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
];

/// Why `(key, value)` would put a secret in an environment, if it would.
fn secret_in_environment(key: &str, value: &str) -> Option<String> {
    if SECRET_SETTINGS.contains(&key) {
        return Some(format!("{key} is a secret setting"));
    }
    let named_secret = ["PASSWORD", "SECRET", "TOKEN", "KEY"]
        .iter()
        .any(|word| key.contains(word));
    if named_secret && !key.ends_with("_FILE") {
        return Some(format!("{key} names a secret and is not a file's path"));
    }
    if value.contains("://") && value.contains('@') {
        return Some(format!("{key} holds a URL with credentials"));
    }
    None
}

#[test]
fn the_secret_check_catches_what_it_is_for() {
    assert!(secret_in_environment("HCPFLOW_SEAL_KEY", "k:AAAA").is_some());
    assert!(secret_in_environment("POSTGRES_PASSWORD", "x").is_some());
    assert!(secret_in_environment("DSN", "postgres://u:p@db/x").is_some());
    assert!(secret_in_environment("POSTGRES_PASSWORD_FILE", "/run/secrets/p").is_none());
    assert!(secret_in_environment("HCPFLOW_CONFIG", "/run/secrets/c.toml").is_none());
}

#[test]
fn no_compose_service_carries_a_secret_in_its_environment() {
    let compose = compose();
    let services = services(&compose);
    assert!(services.len() >= 6, "{services:?}");
    for (name, service) in &services {
        for word in command(service) {
            let flag = word.split('=').next().unwrap_or_default();
            assert!(
                !SECRET_FLAGS.contains(&flag) && secret_in_environment("", &word).is_none(),
                "service {name}: its command line carries a secret ({word})"
            );
        }
        for (key, value) in environment(service) {
            if let Some(why) = secret_in_environment(&key, &value) {
                panic!("service {name}: {why}");
            }
            // A file a setting names is one of the service's own secrets.
            if value.starts_with("/run/secrets/") {
                assert!(
                    mount_paths(service).contains(&value),
                    "service {name}: {key} names {value}, which it does not mount"
                );
            }
        }
    }
}

/// Where a service's secrets appear in its filesystem.
fn mount_paths(service: &Value) -> BTreeSet<String> {
    service["secrets"]
        .as_sequence()
        .into_iter()
        .flatten()
        .map(|secret| match secret {
            Value::String(name) => format!("/run/secrets/{name}"),
            long => match long["target"].as_str() {
                Some(target) if target.starts_with('/') => target.to_owned(),
                Some(target) => format!("/run/secrets/{target}"),
                None => format!("/run/secrets/{}", long["source"].as_str().unwrap()),
            },
        })
        .collect()
}

#[test]
fn only_the_activity_service_holds_cloud_credentials_and_only_migrate_the_owners() {
    let compose = compose();
    for (name, service) in services(&compose) {
        let mounted = secrets(service);
        let cloud = mounted.contains("aws-credentials") || mounted.contains("kubeconfig");
        let cloud_settings = environment(service)
            .iter()
            .any(|(key, _)| key.starts_with("AWS_") || key == "KUBECONFIG");
        assert_eq!(
            cloud || cloud_settings,
            name == "activity",
            "service {name}"
        );
        assert_eq!(
            mounted.contains("hcpflow-migrate.toml"),
            name == "migrate",
            "service {name}"
        );
        let owner_password = mounted.contains("postgres-owner-password");
        assert_eq!(owner_password, name == "postgres", "service {name}");
    }
}

/// What make-secrets.sh writes, in a scratch directory of its own.
fn made_secrets(name: &str) -> Scratch {
    let scratch = Scratch(std::env::temp_dir().join(unique(name)));
    let made = Command::new(compose_dir().join("make-secrets.sh"))
        .env("HCPFLOW_COMPOSE_SECRETS", &scratch.0)
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    scratch
}

#[test]
fn the_settings_make_secrets_writes_are_accepted_by_hcpflow_and_nats_server() {
    let Some(env) =
        stack("the_settings_make_secrets_writes_are_accepted_by_hcpflow_and_nats_server")
    else {
        return;
    };
    let scratch = made_secrets("compose-secrets");

    for (service, user) in [
        ("migrate", "hcpflow-migrate"),
        ("api", "hcpflow-api"),
        ("engine", "hcpflow-engine"),
        ("activity", "hcpflow-activity"),
    ] {
        let config = Command::new(env!("CARGO_BIN_EXE_hcpflow"))
            .arg("config")
            .env_clear()
            .env(
                "HCPFLOW_CONFIG",
                scratch.0.join(format!("hcpflow-{service}.toml")),
            )
            .env("HCPFLOW_SEAL_KEY_FILE", scratch.0.join("seal-key"))
            .env(
                "HCPFLOW_INPUT_DIGEST_KEY_FILE",
                scratch.0.join("input-digest-key"),
            )
            .env(
                "HCPFLOW_AUDIT_SIGNING_KEY_FILE",
                scratch.0.join("audit-signing-key"),
            )
            .output()
            .unwrap();
        assert!(config.status.success(), "{service}: {config:?}");
        let shown: serde_json::Value = serde_json::from_slice(&config.stdout).unwrap();
        assert_eq!(shown["nats_user"], user, "{service}: {shown}");
        let shown = shown.to_string();
        assert!(
            !shown.contains("postgres://"),
            "{service} shows a URL: {shown}"
        );
    }

    // nats-server takes the compose configuration with the accounts and passwords made.
    let accounts = std::fs::read_to_string(scratch.0.join("nats-accounts.conf")).unwrap();
    assert!(!accounts.contains("$HCPFLOW_NATS_PASSWORD"), "{accounts}");
    let nats_dir = scratch.0.join("nats");
    std::fs::create_dir_all(&nats_dir).unwrap();
    let conf = std::fs::read_to_string(compose_dir().join("nats-server.conf"))
        .unwrap()
        .replace(
            "/data/jetstream",
            &nats_dir.join("js").display().to_string(),
        );
    std::fs::write(nats_dir.join("nats-server.conf"), conf).unwrap();
    std::fs::write(nats_dir.join("hcpflow-accounts.conf"), accounts).unwrap();
    let checked = Command::new(env_value(&env, "HCPFLOW_DEV_NATS_SERVER"))
        .arg("-c")
        .arg(nats_dir.join("nats-server.conf"))
        .arg("-t")
        .output()
        .unwrap();
    assert!(checked.status.success(), "{checked:?}");
}

/// Each service's settings file names a NATS user and password that the nats-server of
/// compose.yaml, with the accounts make-secrets.sh wrote, lets in; a wrong password not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_services_nats_user_connects_with_the_password_it_was_given() {
    let Some(env) = stack("each_services_nats_user_connects_with_the_password_it_was_given") else {
        return;
    };
    let scratch = made_secrets("compose-nats");
    let port = crate::support::free_port();
    let conf = std::fs::read_to_string(compose_dir().join("nats-server.conf"))
        .unwrap()
        .replace("0.0.0.0:4222", &format!("127.0.0.1:{port}"))
        .replace(
            "/data/jetstream",
            &scratch.0.join("js").display().to_string(),
        );
    std::fs::write(scratch.0.join("nats-server.conf"), conf).unwrap();
    std::fs::copy(
        scratch.0.join("nats-accounts.conf"),
        scratch.0.join("hcpflow-accounts.conf"),
    )
    .unwrap();
    let mut nats = tokio::process::Command::new(env_value(&env, "HCPFLOW_DEV_NATS_SERVER"))
        .arg("-c")
        .arg(scratch.0.join("nats-server.conf"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let url = format!("nats://127.0.0.1:{port}");
    let connect = |user: String, password: String| {
        let url = url.clone();
        async move {
            let options = async_nats::ConnectOptions::with_user_and_password(user, password);
            tokio::time::timeout(std::time::Duration::from_secs(5), options.connect(url))
                .await
                .is_ok_and(|connected| connected.is_ok())
        }
    };
    // The server is up once any connection gets an answer.
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    for service in ["migrate", "api", "engine", "activity"] {
        let path = scratch.0.join(format!("hcpflow-{service}.toml"));
        let settings: toml::Table = std::fs::read_to_string(&path).unwrap().parse().unwrap();
        let user = settings["nats_user"].as_str().unwrap().to_owned();
        let password = settings["nats_password"].as_str().unwrap().to_owned();
        assert!(!password.is_empty(), "{service}: an empty NATS password");
        assert!(
            connect(user.clone(), password.clone()).await,
            "{service}: {user} was refused"
        );
        assert!(
            !connect(user.clone(), format!("{password}x")).await,
            "{service}: {user} got in with a wrong password"
        );
    }
    let _ = nats.kill().await;
}
