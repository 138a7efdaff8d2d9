//! Watches: from a resourceVersion, with selectors, ending at timeoutSeconds, and 410
//! for a version the log no longer reaches.

use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn a_watch_reports_changes_after_its_version_and_ends_at_its_timeout() {
    let emu = emulator().await;
    post(&emu, "/api/v1/namespaces", &namespace("clusters")).await;
    let (_, list) = get(&emu, "/api/v1/namespaces/clusters/configmaps").await;
    let from = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut watch = Watch::open(
        &emu,
        &format!("/api/v1/namespaces/clusters/configmaps?watch=true&resourceVersion={from}&timeoutSeconds=2&labelSelector=app%3Dx"),
    )
    .await;
    post(
        &emu,
        "/api/v1/namespaces/clusters/configmaps",
        &json!({"metadata": {"name": "ignored"}}),
    )
    .await;
    post(
        &emu,
        "/api/v1/namespaces/clusters/configmaps",
        &json!({"metadata": {"name": "a", "labels": {"app": "x"}}}),
    )
    .await;
    patch(
        &emu,
        "/api/v1/namespaces/clusters/configmaps/a",
        "application/merge-patch+json",
        r#"{"data":{"k":"v"}}"#,
    )
    .await;
    delete(&emu, "/api/v1/namespaces/clusters/configmaps/a").await;
    let mut seen = Vec::new();
    for _ in 0..3 {
        let event = watch.next().await.expect("an event");
        seen.push((
            event["type"].as_str().unwrap().to_owned(),
            event["object"]["metadata"]["name"]
                .as_str()
                .unwrap()
                .to_owned(),
        ));
    }
    assert_eq!(
        seen,
        [
            ("ADDED".into(), "a".into()),
            ("MODIFIED".into(), "a".into()),
            ("DELETED".into(), "a".into())
        ]
    );
    let started = std::time::Instant::now();
    assert!(
        watch.next().await.is_none(),
        "the watch ends at its timeout"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(4));
    emu.stop();
}

#[tokio::test]
async fn a_watch_from_a_version_no_longer_kept_gets_410() {
    let emu = emulator_with(None, 5).await;
    post(&emu, "/api/v1/namespaces", &namespace("clusters")).await;
    for n in 0..10 {
        post(
            &emu,
            "/api/v1/namespaces/clusters/configmaps",
            &json!({"metadata": {"name": format!("c{n}")}}),
        )
        .await;
    }
    let mut watch = Watch::open(
        &emu,
        "/api/v1/namespaces/clusters/configmaps?watch=1&resourceVersion=2",
    )
    .await;
    let event = watch.next().await.unwrap();
    assert_eq!(event["type"], "ERROR");
    assert_eq!(event["object"]["code"], 410);
    // Without a version: the current objects first, as ADDED.
    let mut watch = Watch::open(
        &emu,
        "/api/v1/namespaces/clusters/configmaps?watch=true&timeoutSeconds=1",
    )
    .await;
    let mut added = 0;
    while let Some(event) = watch.next().await {
        assert_eq!(event["type"], "ADDED");
        added += 1;
    }
    assert_eq!(added, 10);
    emu.stop();
}

#[tokio::test]
async fn a_resumed_watch_replays_only_its_own_type_and_namespace() {
    let emu = emulator().await;
    post(&emu, "/api/v1/namespaces", &namespace("clusters")).await;
    post(&emu, "/api/v1/namespaces", &namespace("elsewhere")).await;
    let (_, list) = get(&emu, "/api/v1/namespaces/clusters/configmaps").await;
    let from = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    // Changes made before the watch opens: it must replay them from the log, filtered.
    post(
        &emu,
        "/api/v1/namespaces/clusters/secrets",
        &json!({"metadata": {"name": "s"}}),
    )
    .await;
    post(
        &emu,
        "/api/v1/namespaces/elsewhere/configmaps",
        &json!({"metadata": {"name": "other"}}),
    )
    .await;
    post(
        &emu,
        "/api/v1/namespaces/clusters/configmaps",
        &json!({"metadata": {"name": "mine"}}),
    )
    .await;
    let mut watch = Watch::open(
        &emu,
        &format!("/api/v1/namespaces/clusters/configmaps?watch=true&resourceVersion={from}&timeoutSeconds=1"),
    )
    .await;
    let mut names = Vec::new();
    while let Some(event) = watch.next().await {
        names.push(
            event["object"]["metadata"]["name"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    assert_eq!(names, ["mine"]);
    emu.stop();
}
