//! The image's root filesystem (deploy/image/rootfs.sh, what the Dockerfile's runtime
//! stage holds): `hcpflow` runs in it as the nonroot user, with nothing else there, and
//! does its work against the dev stack.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;

use crate::support::{free_port, http_get, stack, unique, until_listening, Scratch, Server};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_images_root_filesystem_runs_a_workflow_as_nonroot() {
    let Some(env) = stack("the_images_root_filesystem_runs_a_workflow_as_nonroot") else {
        return;
    };
    let _stack = crate::support::shared().await;
    let scratch = Scratch(std::env::temp_dir().join(unique("rootfs")));
    let rootfs = scratch.0.join("rootfs");
    let built = std::process::Command::new(repo().join("deploy/image/rootfs.sh"))
        .arg("--link-binary")
        .arg(&rootfs)
        .arg(env!("CARGO_BIN_EXE_hcpflow"))
        .status()
        .expect("run deploy/image/rootfs.sh");
    assert!(built.success(), "rootfs.sh: {built:?}");

    // Only what the image promises: no shell, no other program.
    assert!(!rootfs.join("bin/sh").exists() && !rootfs.join("usr/bin/sh").exists());
    let programs: Vec<String> = walk(&rootfs)
        .into_iter()
        .filter(|path| path.to_string_lossy().contains("/bin/"))
        .map(|path| path.strip_prefix(&rootfs).unwrap().display().to_string())
        .collect();
    assert_eq!(programs, ["usr/local/bin/hcpflow"]);

    let addr = format!("127.0.0.1:{}", free_port());
    let prefix = unique("image");
    // As the image runs it: the nonroot user in its own root. Without root rights here,
    // a user namespace gives the chroot (as root inside it, mapped to this user).
    let rootfs_arg = rootfs.display().to_string();
    let program: Vec<String> = if running_as_root() {
        vec!["chroot", "--userspec=65532:65532", &rootfs_arg]
    } else {
        vec!["unshare", "--map-root-user", "chroot", &rootfs_arg]
    }
    .into_iter()
    .chain(["/usr/local/bin/hcpflow"])
    .map(str::to_owned)
    .collect();
    let mut server = Server::start_program(
        program,
        env,
        &prefix,
        &["--metrics-addr", &addr],
        scratch.0.join("server.log"),
    )
    .await;
    let id = format!("{prefix}-chain");
    let reply = server
        .start_workflow("noop_chain", &id, json!({"steps": 3}))
        .await;
    assert_eq!(reply["ok"], true, "{reply}");
    assert_eq!(
        server.wait_terminal(&id, Duration::from_secs(60)).await,
        "completed"
    );
    if running_as_root() {
        // chroot switched to the image's user before running hcpflow (the same process).
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", server.pid().unwrap())).unwrap();
        let uids = status.lines().find_map(|l| l.strip_prefix("Uid:")).unwrap();
        assert!(
            uids.split_whitespace().all(|uid| uid == "65532"),
            "hcpflow runs as {uids}"
        );
    }
    // The endpoint opens before the API answers; waiting costs nothing.
    until_listening(&addr).await;
    let ready = http_get(&addr, "/readyz").await;
    assert!(ready.starts_with("HTTP/1.1 200 "), "{ready}");
    let status = server.stop().await;
    assert!(status.success(), "{status:?}");
}

/// Every file (not directory) under `dir`, links included, sorted.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(next) = pending.pop() {
        for entry in std::fs::read_dir(&next).unwrap() {
            let entry = entry.unwrap();
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                pending.push(entry.path());
            } else {
                files.push(entry.path());
            }
        }
    }
    files.sort();
    files
}

fn running_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let uids = status.lines().find_map(|line| line.strip_prefix("Uid:"))?;
            uids.split_whitespace()
                .nth(1)
                .map(|effective| effective == "0")
        })
        .unwrap_or(false)
}
