//! Every golden history verifies offline (chain, signature) and replays against
//! today's workflow code with exactly its recorded decisions.

use hcpflow_audit::replay::replay;
use hcpflow_replay_tests::{golden_files, load};

#[test]
fn every_golden_history_verifies_and_replays_deterministically() {
    let files = golden_files().unwrap();
    let catalog = hcpflow_replay_tests::catalog();
    let mut failures = Vec::new();
    for file in &files {
        let export = load(file).unwrap_or_else(|e| panic!("{e:#}"));
        let report = replay(catalog.registry(), &export.workflow_id, &export.history);
        if let Some(divergence) = &report.divergence {
            failures.push(format!("{}: {divergence:?}", file.display()));
        }
        assert_eq!(report.status, export.header.status, "{}", file.display());
    }
    assert!(
        failures.is_empty(),
        "histories that no longer replay: {failures:#?}"
    );
}

#[test]
fn the_required_cases_are_recorded() {
    let names: Vec<String> = golden_files()
        .unwrap()
        .iter()
        .map(|f| {
            let kind = f.parent().unwrap().file_name().unwrap().to_string_lossy();
            format!("{kind}/{}", f.file_name().unwrap().to_string_lossy())
        })
        .collect();
    for required in [
        "create_hosted_cluster/three-zones-private-link.jsonl",
        "create_hosted_cluster/three-zones-operator-privatelink.jsonl",
        "create_hosted_cluster/rolled-back.jsonl",
        "create_hosted_cluster/resumed-after-crash.jsonl",
        "scale_node_pool/scale-up.jsonl",
        "destroy_hosted_cluster/destroy.jsonl",
        "destroy_hosted_cluster/destroy-operator-privatelink.jsonl",
    ] {
        assert!(
            names.iter().any(|n| n == required),
            "{required} missing: {names:?}"
        );
    }
}

#[test]
fn the_cases_are_what_their_names_say() {
    let dir = hcpflow_replay_tests::histories_dir();
    let load_case = |case: &str| load(&dir.join(case)).unwrap();
    let create = load_case("create_hosted_cluster/three-zones-private-link.jsonl");
    assert_eq!(create.header.status, "completed");
    let catalog = hcpflow_replay_tests::catalog();
    let report = replay(catalog.registry(), &create.workflow_id, &create.history);
    let interface_endpoints = report
        .ledger
        .iter()
        .filter(|l| l.kind == "ec2:vpc-endpoint" && l.step.contains("interface"))
        .count();
    assert_eq!(
        interface_endpoints, 1,
        "one interface endpoint: {:?}",
        report.ledger
    );
    assert!(
        report
            .ledger
            .iter()
            .filter(|l| l.kind == "ec2:subnet")
            .count()
            == 6
    );

    // Since the operators own PrivateLink: nothing of it created by us, each zone's
    // interface of both endpoints observed as theirs, and a destroy that checks it is gone.
    let operators = load_case("create_hosted_cluster/three-zones-operator-privatelink.jsonl");
    assert_eq!(operators.header.status, "completed");
    let report = replay(
        catalog.registry(),
        &operators.workflow_id,
        &operators.history,
    );
    assert!(report.divergence.is_none(), "{:?}", report.divergence);
    let ours = [
        "aws.create_load_balancer",
        "aws.create_endpoint_service",
        "aws.create_endpoint_security_group",
        "aws.create_interface_endpoint",
    ];
    assert!(
        !report
            .ledger
            .iter()
            .any(|l| ours.iter().any(|step| l.step.starts_with(step))),
        "no load balancer, endpoint service or endpoint of ours: {:?}",
        report.ledger
    );
    let interfaces = report
        .ledger
        .iter()
        .filter(|l| l.action == "observed" && l.kind == "ec2:network-interface")
        .count();
    assert_eq!(interfaces, 3 * 2, "{:?}", report.ledger);
    for step in [
        "aws.await_privatelink_removed",
        "aws.delete_guest_resources",
    ] {
        assert!(
            report.destroy_would_run.iter().any(|s| s.starts_with(step)),
            "{step} not in {:?}",
            report.destroy_would_run
        );
    }

    let rolled_back = load_case("create_hosted_cluster/rolled-back.jsonl");
    assert_eq!(rolled_back.header.status, "compensated");
    let report = replay(
        catalog.registry(),
        &rolled_back.workflow_id,
        &rolled_back.history,
    );
    let created = report
        .ledger
        .iter()
        .filter(|l| l.action == "created")
        .count();
    let deleted = report
        .ledger
        .iter()
        .filter(|l| l.action == "deleted")
        .count();
    assert_eq!(created, deleted, "a rollback deletes all it created");
    assert!(
        report.destroy_would_run.is_empty(),
        "{:?}",
        report.destroy_would_run
    );

    // The crash shows as a gap while the lease of the killed server's work ran out.
    let resumed = load_case("create_hosted_cluster/resumed-after-crash.jsonl");
    assert_eq!(resumed.header.status, "completed");
    let longest_gap = resumed
        .history
        .windows(2)
        .map(|w| {
            w[1].recorded_at
                .as_millis()
                .saturating_sub(w[0].recorded_at.as_millis())
        })
        .max()
        .unwrap();
    assert!(longest_gap >= 10_000, "{longest_gap} ms");
}

/// The history cache weighs events by their data's JSON size, counted without building
/// the JSON (`Event::record_data_len`): on every event of the golden histories (12 of
/// the kinds; the engine's unit test covers the other 11) it is the size of the data as
/// stored.
#[test]
fn every_event_s_counted_size_is_its_stored_size() {
    let mut kinds = std::collections::BTreeSet::new();
    for file in golden_files().unwrap() {
        let export = load(&file).unwrap_or_else(|e| panic!("{e:#}"));
        for recorded in &export.history {
            let (kind, data) = recorded.event.to_record();
            let stored = serde_json::to_vec(&data).unwrap().len() as u64;
            assert_eq!(
                recorded.event.record_data_len(),
                stored,
                "{kind} at seq {} of {}",
                recorded.seq,
                file.display()
            );
            kinds.insert(kind);
        }
    }
    assert!(kinds.len() >= 10, "only {kinds:?} were checked");
}
