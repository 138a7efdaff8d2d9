//! The machine's kubectl against the emulator: apply --server-side, get -o json, wait,
//! scale, delete --wait.

use std::process::Command;

use crate::support::*;

fn kubectl(kubeconfig: &std::path::Path, args: &[&str], stdin: Option<&str>) -> (bool, String) {
    use std::io::Write;
    let mut child = Command::new("kubectl")
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    if let Some(input) = stdin {
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
    }
    drop(child.stdin.take());
    let output = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    (output.status.success(), text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_applies_waits_scales_and_deletes() {
    if Command::new("kubectl")
        .arg("version")
        .arg("--client")
        .output()
        .is_err()
    {
        assert!(
            std::env::var_os("HCPFLOW_REQUIRE_STACK").is_none(),
            "kubectl must be installed under make test"
        );
        eprintln!("skipping: no kubectl on this machine");
        return;
    }
    let emu = emulator().await;
    let dir = std::env::temp_dir().join(format!(
        "hcpflow-kubectl-{}-{}",
        std::process::id(),
        emu.addr.port()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: emu\n  cluster:\n    server: {}\ncontexts:\n- name: emu\n  context:\n    cluster: emu\n    user: emu\ncurrent-context: emu\nusers:\n- name: emu\n  user: {{}}\n",
            emu.url()
        ),
    )
    .unwrap();
    let run = |args: &[&str], stdin: Option<&str>| {
        let (ok, text) = kubectl(&kubeconfig, args, stdin);
        assert!(ok, "kubectl {args:?} failed: {text}");
        text
    };
    // kubectl is blocking: run it off the runtime's threads.
    let mut hc = hosted_cluster("demo");
    hc["metadata"]["namespace"] = serde_json::json!("clusters");
    let mut pool = node_pool("demo-a", "demo", 0);
    pool["metadata"]["namespace"] = serde_json::json!("clusters");
    let mut pull = pull_secret("demo");
    pull["metadata"]["namespace"] = serde_json::json!("clusters");
    let manifest = format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: clusters\n---\n{}---\n{}---\n{}",
        serde_yaml_ng::to_string(&pull).unwrap(),
        serde_yaml_ng::to_string(&hc).unwrap(),
        serde_yaml_ng::to_string(&pool).unwrap()
    );
    let manifest = manifest.as_str();
    tokio::task::block_in_place(|| {
        let applied = run(
            &["apply", "--server-side", "--field-manager=test", "-f", "-"],
            Some(manifest),
        );
        assert!(
            applied.contains("hostedcluster.hypershift.openshift.io/demo serverside-applied"),
            "{applied}"
        );
        run(
            &[
                "wait",
                "--for=condition=Available",
                "hostedcluster/demo",
                "-n",
                "clusters",
                "--timeout=20s",
            ],
            None,
        );
        let json = run(
            &[
                "get",
                "hostedcluster",
                "demo",
                "-n",
                "clusters",
                "-o",
                "json",
            ],
            None,
        );
        let hc: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(hc["spec"]["infraID"], "demo-abcde");
        run(
            &["scale", "nodepool/demo-a", "-n", "clusters", "--replicas=2"],
            None,
        );
        run(
            &[
                "wait",
                "--for=condition=Ready",
                "nodepool/demo-a",
                "-n",
                "clusters",
                "--timeout=20s",
            ],
            None,
        );
        let replicas = run(
            &[
                "get",
                "nodepool",
                "demo-a",
                "-n",
                "clusters",
                "-o",
                "jsonpath={.status.replicas}",
            ],
            None,
        );
        assert_eq!(replicas.trim(), "2");
        run(
            &[
                "delete",
                "hostedcluster",
                "demo",
                "-n",
                "clusters",
                "--wait",
                "--timeout=20s",
            ],
            None,
        );
        run(
            &["delete", "namespace", "clusters", "--wait", "--timeout=20s"],
            None,
        );
        let (ok, text) = kubectl(&kubeconfig, &["get", "namespace", "clusters"], None);
        assert!(!ok && text.contains("NotFound"), "{text}");
    });
    emu.stop();
    let _ = std::fs::remove_dir_all(&dir);
}
