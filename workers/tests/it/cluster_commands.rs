//! The `hcpflow cluster` and `hcpflow audit` commands, run as a user runs them (the real
//! binary, over NATS) against a real server: create from a file, a refused second
//! create, scale with live progress, status, destroy without waiting then follow it,
//! list, audit — and nothing left in moto or the emulator.

use crate::cluster_support::{
    cluster_name, cluster_stack, holdings, prerequisites, server_with_key, wait_for_guest,
    Holdings, ZONES,
};
use crate::support::{output_json, output_text, run_cli, unique};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cluster_commands_drive_a_cluster_through_its_life() {
    let Some(stack) = cluster_stack("the_cluster_commands_drive_a_cluster_through_its_life").await
    else {
        return;
    };
    let _shared = crate::support::shared().await;
    let (moto, kube) = (&stack.moto, &stack.kube);
    let tag = unique("cli").to_lowercase();
    let pre = prerequisites(moto, &tag).await;
    let prefix = unique("cli");
    let server = server_with_key(&stack, &prefix, &format!("{prefix}-key")).await;
    let name = cluster_name("cli");

    let dir = std::env::temp_dir().join(format!("hcpflow-{tag}"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("pull-secret.json"), "{\"auths\": {}}\n").unwrap();
    let file = dir.join("cluster.yaml");
    std::fs::write(
        &file,
        format!(
            "name: {name}\nzones: [{}]\nbase_domain: {}\nendpoint_access: PublicAndPrivate\n\
             oidc_bucket: {}\nnamespace: ns-{name}\n\
             management: {{vpc_id: {}, subnet_ids: [{}]}}\n\
             release_image: quay.io/openshift-release-dev/ocp-release:4.17.0-x86_64\n\
             pull_secret_file: pull-secret.json\n\
             ssh_public_key: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAItest hcpflow\n",
            ZONES.join(", "),
            pre.base_domain,
            pre.bucket,
            pre.management_vpc,
            pre.management_subnets.join(", ")
        ),
    )
    .unwrap();
    let file = file.to_str().unwrap();

    // Bad input: a clear error naming the problems, nothing started.
    let bad = run_cli(&server, &["cluster", "create", "--name", "Bad_Name"]).await;
    let (_, stderr) = output_text(&bad);
    assert!(!bad.status.success());
    assert!(
        stderr.contains("invalid_request")
            && stderr.contains("zones: required")
            && stderr.contains("release_image: required"),
        "{stderr}"
    );

    // Create from the file (2 replicas per zone by default), as JSON.
    let created =
        output_json(&run_cli(&server, &["cluster", "create", "-f", file, "-o", "json"]).await);
    assert_eq!(created["status"], "completed", "{created}");
    let infra_id = created["output"]["infra_id"].as_str().unwrap().to_owned();
    wait_for_guest(moto, &infra_id).await;
    let held = holdings(moto, kube, &name, &infra_id, &pre).await;
    assert_eq!(held, Holdings::one_cluster());

    // A second create of the live name is refused.
    let again = run_cli(&server, &["cluster", "create", "-f", file, "--no-wait"]).await;
    let (_, stderr) = output_text(&again);
    assert!(!again.status.success());
    assert!(stderr.contains("conflict"), "{stderr}");

    // Scale with progress lines.
    let pool = format!("{name}-us-east-1a");
    let scaled = run_cli(
        &server,
        &[
            "cluster",
            "scale",
            &name,
            "--node-pool",
            &pool,
            "--replicas",
            "3",
        ],
    )
    .await;
    let (stdout, stderr) = output_text(&scaled);
    assert!(scaled.status.success(), "{stderr}\n{stdout}");
    assert!(
        stdout.contains(&format!("✓ kube.scale_node_pool {pool} → 3")),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("node pool {pool}: 2 → 3 replicas")),
        "{stdout}"
    );

    let status = output_json(&run_cli(&server, &["cluster", "status", &name, "-o", "json"]).await);
    assert_eq!(status["cluster"]["state"], "ready", "{status}");
    assert_eq!(status["node_pools"][&pool], 3, "{status}");
    assert_eq!(status["workflows"].as_array().unwrap().len(), 2, "{status}");

    // Destroy without waiting, then follow it through status.
    let submitted = output_json(
        &run_cli(
            &server,
            &["cluster", "destroy", &name, "--no-wait", "-o", "json"],
        )
        .await,
    );
    assert_eq!(submitted["status"], "started", "{submitted}");
    let followed = run_cli(&server, &["cluster", "status", &name, "--follow"]).await;
    let (stdout, stderr) = output_text(&followed);
    assert!(followed.status.success(), "{stderr}\n{stdout}");
    assert!(stdout.contains("● completed"), "{stdout}");
    assert!(stdout.contains("✓ aws.delete_vpc"), "{stdout}");
    assert_eq!(
        holdings(moto, kube, &name, &infra_id, &pre).await,
        Holdings::default()
    );

    let listed = output_json(&run_cli(&server, &["cluster", "list", "--all", "-o", "json"]).await);
    let row = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name.as_str())
        .cloned()
        .unwrap_or_else(|| panic!("{name} not listed: {listed}"));
    assert_eq!(row["state"], "destroyed");

    let audit = output_json(
        &run_cli(
            &server,
            &["audit", "verify", "--cluster", &name, "-o", "json"],
        )
        .await,
    );
    let reports = audit.as_array().unwrap();
    let types: Vec<&str> = reports
        .iter()
        .map(|r| r["workflow_type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        [
            "create_hosted_cluster",
            "scale_node_pool",
            "destroy_hosted_cluster"
        ]
    );
    for report in reports {
        assert!(
            report["chain"]["verified"] == true,
            "{}: chain {}, problems {}",
            report["workflow_type"],
            report["chain"],
            report["problems"]
        );
    }
    assert_eq!(
        reports[0]["resources_created"], reports[2]["resources_deleted"],
        "{audit}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
