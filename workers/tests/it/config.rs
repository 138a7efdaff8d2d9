//! One precedence rule for every setting, through the real binary: a flag beats its
//! environment variable, which beats the config file, which beats the default.

use std::process::Command;

use serde_json::Value;

fn hcpflow_config(file: &std::path::Path, env: &[(&str, &str)], flags: &[&str]) -> Value {
    let mut command = Command::new(env!("CARGO_BIN_EXE_hcpflow"));
    // Nothing inherited: the test's own environment holds the dev stack's settings.
    command.env_clear().arg("config").arg("--config").arg(file);
    for (key, value) in env {
        command.env(key, value);
    }
    let output = command.args(flags).output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

#[test]
fn flags_beat_the_environment_which_beats_the_file_which_beats_defaults() {
    let dir = std::env::temp_dir().join(format!("hcpflow-precedence-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("hcpflow.toml");
    std::fs::write(
        &file,
        "database_url = \"postgres://from-file\"\nprefix = \"file\"\nmax_body_bytes = 10\n\
         workflow_concurrency = 5\naws_region = \"eu-west-1\"\nseal_key = \"k1:AAAA\"\n",
    )
    .unwrap();

    let settings = hcpflow_config(
        &file,
        &[
            ("HCPFLOW_PREFIX", "env"),
            ("HCPFLOW_MAX_BODY_BYTES", "20"),
            ("AWS_REGION", "us-west-2"),
        ],
        &["--prefix", "flag"],
    );
    assert_eq!(settings["prefix"], "flag", "flag over environment and file");
    assert_eq!(settings["max_body_bytes"], 20, "environment over file");
    assert_eq!(settings["aws_region"], "us-west-2", "environment over file");
    assert_eq!(settings["workflow_concurrency"], 5, "file over default");
    assert_eq!(settings["activity_concurrency"], 64, "the default");
    assert_eq!(settings["nats_url"], "nats://127.0.0.1:4222", "the default");
    assert_eq!(settings["seal_key"], "[set]", "secrets are never printed");
    assert_eq!(settings["database_url"], "[set]");
    let text = settings.to_string();
    assert!(
        !text.contains("from-file") && !text.contains("AAAA"),
        "{text}"
    );

    let defaults_only = hcpflow_config(&file, &[], &[]);
    assert_eq!(defaults_only["prefix"], "file");
    assert_eq!(defaults_only["max_body_bytes"], 10);
    std::fs::remove_dir_all(dir).unwrap();
}

/// A pool whose every connection the roles hold for good is refused before anything
/// connects, with the least size that works; none is needed to see it.
#[test]
fn a_pool_the_roles_would_starve_is_refused_at_start() {
    let output = Command::new(env!("CARGO_BIN_EXE_hcpflow"))
        .env_clear()
        .env(
            "HCPFLOW_DATABASE_URL",
            "postgres://app:secret@127.0.0.1:1/hcpflow",
        )
        .env("HCPFLOW_NATS_URL", "nats://127.0.0.1:1")
        .args(["server", "--database-pool-size", "4"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("database_pool_size 4 is too small") && stderr.contains("at least 5"),
        "{stderr}"
    );
}
