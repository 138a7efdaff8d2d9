//! Discovery, CRUD with Kubernetes metadata and errors, patches, server-side apply,
//! status and scale subresources, finalizers, namespace deletion, and persistence.

use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn discovery_lists_the_served_resources_with_their_subresources() {
    let emu = emulator().await;
    let (status, version) = get(&emu, "/version").await;
    assert_eq!(status, 200);
    assert_eq!(version["major"], "1");
    let (_, groups) = get(&emu, "/apis").await;
    assert_eq!(groups["groups"][0]["name"], "hypershift.openshift.io");
    let (_, list) = get(&emu, "/apis/hypershift.openshift.io/v1beta1").await;
    let names: Vec<&str> = list["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    for name in [
        "hostedclusters",
        "hostedclusters/status",
        "nodepools",
        "nodepools/status",
        "nodepools/scale",
    ] {
        assert!(names.contains(&name), "{names:?}");
    }
    let (_, core) = get(&emu, "/api/v1").await;
    assert!(core["resources"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["name"] == "secrets" && r["namespaced"] == true));
    let (status, missing) = get(&emu, "/apis/example.com/v1").await;
    assert_eq!((status, missing["kind"].as_str()), (404, Some("Status")));

    // apps/v1, for the HyperShift operator's Deployment as `hypershift install` makes it.
    assert_eq!(groups["groups"][1]["name"], "apps");
    let (_, apps) = get(&emu, "/apis/apps/v1").await;
    assert!(apps["resources"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["name"] == "deployments" && r["namespaced"] == true));
    let (status, operator) = get(
        &emu,
        "/apis/apps/v1/namespaces/hypershift/deployments/operator",
    )
    .await;
    assert_eq!(status, 200);
    let container = &operator["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["name"], "operator");
    assert!(container["args"]
        .as_array()
        .unwrap()
        .contains(&json!("--private-platform=None")));
    assert_eq!(operator["status"]["readyReplicas"], 1);
    emu.stop();
}

#[tokio::test]
async fn objects_get_metadata_and_errors_come_back_as_status_objects() {
    let emu = emulator().await;
    let (status, ns) = post(&emu, "/api/v1/namespaces", &namespace("clusters")).await;
    assert_eq!(status, 201);
    assert_eq!(ns["status"]["phase"], "Active");
    let secret =
        json!({"metadata": {"name": "pull", "labels": {"app": "hc"}}, "data": {"k": "dg=="}});
    let (status, created) = post(&emu, "/api/v1/namespaces/clusters/secrets", &secret).await;
    assert_eq!(status, 201);
    for field in ["uid", "creationTimestamp", "resourceVersion"] {
        assert!(created["metadata"][field].is_string(), "{field}: {created}");
    }
    let (status, again) = post(&emu, "/api/v1/namespaces/clusters/secrets", &secret).await;
    assert_eq!(
        (status, again["reason"].as_str(), again["kind"].as_str()),
        (409, Some("AlreadyExists"), Some("Status"))
    );
    let (status, nowhere) = post(&emu, "/api/v1/namespaces/nowhere/secrets", &secret).await;
    assert_eq!(
        (status, nowhere["reason"].as_str()),
        (404, Some("NotFound"))
    );

    // Lists with selectors and a resourceVersion.
    post(
        &emu,
        "/api/v1/namespaces/clusters/secrets",
        &json!({"metadata": {"name": "other"}}),
    )
    .await;
    let (_, list) = get(
        &emu,
        "/api/v1/namespaces/clusters/secrets?labelSelector=app%3Dhc",
    )
    .await;
    assert_eq!(list["kind"], "SecretList");
    assert_eq!(list["items"].as_array().unwrap().len(), 1);
    assert!(list["metadata"]["resourceVersion"].is_string());
    let (_, list) = get(&emu, "/api/v1/secrets?fieldSelector=metadata.name%3Dother").await;
    assert_eq!(list["items"][0]["metadata"]["name"], "other");

    // Update: a stale resourceVersion is a Conflict; the current one moves it on.
    let mut stale = created.clone();
    stale["metadata"]["resourceVersion"] = json!("1");
    let (status, conflict) = put(&emu, "/api/v1/namespaces/clusters/secrets/pull", &stale).await;
    assert_eq!(
        (status, conflict["reason"].as_str()),
        (409, Some("Conflict"))
    );
    let mut current = created.clone();
    current["data"]["k"] = json!("dzI=");
    let (status, updated) = put(&emu, "/api/v1/namespaces/clusters/secrets/pull", &current).await;
    assert_eq!(status, 200);
    let rv = |v: &serde_json::Value| {
        v["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse::<u64>()
            .unwrap()
    };
    assert!(rv(&updated) > rv(&created));
    assert_eq!(updated["metadata"]["uid"], created["metadata"]["uid"]);

    // Required fields of a HostedCluster (as the CRD's schema has them): every
    // missing one is named.
    let (status, invalid) = post(
        &emu,
        HC,
        &json!({"metadata": {"name": "x"}, "spec": {"platform": {"type": "AWS"}}}),
    )
    .await;
    assert_eq!((status, invalid["reason"].as_str()), (422, Some("Invalid")));
    let message = invalid["message"].as_str().unwrap();
    assert!(
        ["spec.release", "spec.pullSecret", "spec.services"]
            .iter()
            .all(|field| message.contains(&format!("{field}: Required value"))),
        "{message}"
    );
    // As `NewInvalid` words it: the group kind, the errors as a list, a cause each.
    assert!(
        message.starts_with("HostedCluster.hypershift.openshift.io \"x\" is invalid: ["),
        "{message}"
    );
    let details = &invalid["details"];
    assert_eq!(
        (&details["name"], &details["group"], &details["kind"]),
        (
            &json!("x"),
            &json!("hypershift.openshift.io"),
            &json!("HostedCluster")
        )
    );
    assert!(details["causes"].as_array().unwrap().contains(
        &json!({"reason": "FieldValueRequired", "message": "Required value",
                          "field": "spec.pullSecret"})
    ));
    emu.stop();
}

#[tokio::test]
async fn status_changes_only_through_status_and_generation_counts_spec_changes() {
    let emu = emulator().await;
    post(&emu, "/api/v1/namespaces", &namespace("clusters")).await;
    let mut pool = node_pool("np", "c", 0);
    pool["status"] = json!({"replicas": 9});
    pool["metadata"]["annotations"] = json!({"hcpflow.io/emulator-stall-at": "0"});
    let (_, created) = post(&emu, NP, &pool).await;
    assert!(
        created.get("status").is_none(),
        "status is ignored on create"
    );
    assert_eq!(created["metadata"]["generation"], 1);

    let path = format!("{NP}/np");
    let (_, spec_patched) = patch(
        &emu,
        &path,
        "application/merge-patch+json",
        r#"{"spec":{"replicas":3},"status":{"replicas":7}}"#,
    )
    .await;
    assert_eq!(spec_patched["metadata"]["generation"], 2);
    assert_ne!(spec_patched["status"]["replicas"], 7);
    let (_, status_patched) = patch(
        &emu,
        &format!("{path}/status"),
        "application/merge-patch+json",
        r#"{"spec":{"replicas":5},"status":{"observedGeneration":2}}"#,
    )
    .await;
    assert_eq!(
        status_patched["spec"]["replicas"], 3,
        "spec does not change through /status"
    );
    assert_eq!(status_patched["status"]["observedGeneration"], 2);
    assert_eq!(
        status_patched["metadata"]["generation"], 2,
        "a status write is no spec change"
    );

    // JSON patch, and the scale subresource.
    let (status, json_patched) = patch(
        &emu,
        &path,
        "application/json-patch+json",
        r#"[{"op":"replace","path":"/spec/replicas","value":4}]"#,
    )
    .await;
    assert_eq!(
        (status, json_patched["spec"]["replicas"].as_i64()),
        (200, Some(4))
    );
    let (_, scale) = get(&emu, &format!("{path}/scale")).await;
    assert_eq!(
        (scale["kind"].as_str(), scale["spec"]["replicas"].as_i64()),
        (Some("Scale"), Some(4))
    );
    let (_, scaled) = patch(
        &emu,
        &format!("{path}/scale"),
        "application/merge-patch+json",
        r#"{"spec":{"replicas":6}}"#,
    )
    .await;
    assert_eq!(scaled["spec"]["replicas"], 6);
    let (_, pool) = get(&emu, &path).await;
    assert_eq!(pool["spec"]["replicas"], 6);
    emu.stop();
}

#[tokio::test]
async fn server_side_apply_creates_tracks_owners_conflicts_and_forces() {
    let emu = emulator().await;
    post(&emu, "/api/v1/namespaces", &namespace("clusters")).await;
    let path = "/api/v1/namespaces/clusters/configmaps/settings";
    let applied = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"settings"},"data":{"a":"1","b":"2"}}"#;
    let (status, _) = patch(&emu, path, "application/apply-patch+yaml", applied).await;
    assert_eq!(status, 400, "fieldManager is required");
    let apply = |manager: &'static str, force: bool, body: &'static str| {
        let emu = &emu;
        async move {
            let path = format!(
                "{path}?fieldManager={manager}{}",
                if force { "&force=true" } else { "" }
            );
            patch(emu, &path, "application/apply-patch+yaml", body).await
        }
    };
    let (status, created) = apply("hcpflow", false, applied).await;
    assert_eq!(
        status, 201,
        "an apply of something absent creates it: {created}"
    );
    assert_eq!(
        created["metadata"]["managedFields"][0]["manager"],
        "hcpflow"
    );
    let (status, _) = apply("hcpflow", false, applied).await;
    assert_eq!(status, 200);

    // YAML works too; another manager setting a field differently conflicts.
    let yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  a: \"9\"\n";
    let (status, conflict) = apply("someone-else", false, yaml).await;
    assert_eq!(
        (status, conflict["reason"].as_str()),
        (409, Some("Conflict"))
    );
    assert!(
        conflict["message"].as_str().unwrap().contains(".data.a"),
        "{conflict}"
    );
    let (status, forced) = apply("someone-else", true, yaml).await;
    assert_eq!((status, forced["data"]["a"].as_str()), (200, Some("9")));

    // hcpflow stops applying b: it goes; a is someone-else's now and stays.
    let (_, after) = apply(
        "hcpflow",
        false,
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"settings"}}"#,
    )
    .await;
    assert_eq!(after["data"], json!({"a": "9"}));
    emu.stop();
}

#[tokio::test]
async fn finalizers_hold_a_delete_and_a_namespace_delete_cascades() {
    let emu = emulator().await;
    post(&emu, "/api/v1/namespaces", &namespace("clusters")).await;
    let held = json!({"metadata": {"name": "held", "finalizers": ["example.com/hold"]}});
    post(&emu, "/api/v1/namespaces/clusters/configmaps", &held).await;
    post(
        &emu,
        "/api/v1/namespaces/clusters/secrets",
        &json!({"metadata": {"name": "s"}}),
    )
    .await;
    let (status, deleting) = delete(&emu, "/api/v1/namespaces/clusters/configmaps/held").await;
    assert_eq!(status, 202);
    assert!(deleting["metadata"]["deletionTimestamp"].is_string());

    let (status, ns) = delete(&emu, "/api/v1/namespaces/clusters").await;
    assert_eq!(status, 202);
    assert_eq!(ns["status"]["phase"], "Terminating");
    let (status, _) = get(&emu, "/api/v1/namespaces/clusters/secrets/s").await;
    assert_eq!(status, 404, "the namespace's objects go with it");
    let (status, refused) = post(
        &emu,
        "/api/v1/namespaces/clusters/secrets",
        &json!({"metadata": {"name": "late"}}),
    )
    .await;
    assert_eq!(
        (status, refused["reason"].as_str()),
        (403, Some("Forbidden"))
    );

    // The finalizer's owner lets go: the object and then the namespace are gone.
    patch(
        &emu,
        "/api/v1/namespaces/clusters/configmaps/held",
        "application/merge-patch+json",
        r#"{"metadata":{"finalizers":null}}"#,
    )
    .await;
    let (status, _) = get(&emu, "/api/v1/namespaces/clusters/configmaps/held").await;
    assert_eq!(status, 404);
    let (status, _) = get(&emu, "/api/v1/namespaces/clusters").await;
    assert_eq!(status, 404);
    emu.stop();
}

#[tokio::test]
async fn a_restart_with_a_state_file_keeps_the_objects() {
    let dir = std::env::temp_dir().join(format!("hcpflow-emulator-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("state.json");
    let _ = std::fs::remove_file(&file);
    let emu = emulator_with(Some(file.clone()), 1_000).await;
    post(&emu, "/api/v1/namespaces", &namespace("kept")).await;
    let (_, before) = get(&emu, "/api/v1/namespaces/kept").await;
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    emu.stop();
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;

    let emu = emulator_with(Some(file), 1_000).await;
    let (status, after) = get(&emu, "/api/v1/namespaces/kept").await;
    assert_eq!(status, 200);
    assert_eq!(after["metadata"]["uid"], before["metadata"]["uid"]);
    // resourceVersions go on from where they were.
    let (_, made) = post(&emu, "/api/v1/namespaces", &namespace("new")).await;
    let rv = |v: &serde_json::Value| {
        v["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse::<u64>()
            .unwrap()
    };
    assert!(rv(&made) > rv(&before));
    emu.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Secrets as the API server checks them (pkg/apis/core/validation: `ValidateSecret`,
/// `ValidateSecretUpdate`): a `kubernetes.io/dockerconfigjson` Secret needs
/// `data[.dockerconfigjson]` holding a JSON object, a `kubernetes.io/dockercfg` one
/// `data[.dockercfg]`; refused with 422 Invalid and one cause per field, on create,
/// replace, merge and JSON patch and server-side apply alike; and a Secret's `type`
/// never changes. `stringData` is written into `data`, the type defaults to `Opaque`,
/// and a `data` value that is not base64 is a bad request.
#[tokio::test]
async fn a_pull_secret_must_hold_a_json_document_and_a_secret_keeps_its_type() {
    use base64::Engine;
    let b64 = |text: &str| base64::engine::general_purpose::STANDARD.encode(text);
    let emu = emulator().await;
    post(&emu, "/api/v1/namespaces", &namespace("clusters")).await;
    let secrets = "/api/v1/namespaces/clusters/secrets";
    let pull = |name: &str, data: serde_json::Value| {
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
               "type": "kubernetes.io/dockerconfigjson", "data": data})
    };
    let redacted = "Invalid value: \"<secret contents redacted>\"";

    // Not JSON: the field error says why.
    let (status, refused) = post(
        &emu,
        secrets,
        &pull("bad", json!({".dockerconfigjson": b64("hunter2")})),
    )
    .await;
    assert_eq!(status, 422, "{refused}");
    let detail = format!("{redacted}: invalid character 'h' at offset 1");
    assert_eq!(
        refused,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": format!("Secret \"bad\" is invalid: data[.dockerconfigjson]: {detail}"),
               "reason": "Invalid", "code": 422,
               "details": {"name": "bad", "kind": "Secret", "causes": [
                   {"reason": "FieldValueInvalid", "message": detail,
                    "field": "data[.dockerconfigjson]"}]}})
    );
    for (document, error) in [
        (r#"{"auths": {"#, "unexpected end of JSON input"),
        ("", "unexpected end of JSON input"),
        (r#"{"auths": {}} x"#, "invalid character 'x' at offset 15"),
        (r#"{auths: {}}"#, "invalid character 'a' at offset 2"),
        (
            r#"["auths"]"#,
            "json: cannot unmarshal array into Go value of type map[string]interface {}",
        ),
    ] {
        let (status, refused) = post(
            &emu,
            secrets,
            &pull("bad", json!({".dockerconfigjson": b64(document)})),
        )
        .await;
        assert_eq!(status, 422, "{document}: {refused}");
        assert_eq!(
            refused["details"]["causes"][0]["message"],
            format!("{redacted}: {error}"),
            "{document}"
        );
    }

    // Without the key.
    let (status, refused) = post(
        &emu,
        secrets,
        &pull("bad", json!({"config.json": b64("{}")})),
    )
    .await;
    assert_eq!(status, 422, "{refused}");
    assert_eq!(
        refused["message"],
        "Secret \"bad\" is invalid: data[.dockerconfigjson]: Required value"
    );
    assert_eq!(
        refused["details"]["causes"],
        json!([{"reason": "FieldValueRequired", "message": "Required value",
                "field": "data[.dockerconfigjson]"}])
    );
    let mut dockercfg = pull("bad", json!({".dockerconfigjson": b64("{}")}));
    dockercfg["type"] = json!("kubernetes.io/dockercfg");
    let (status, refused) = post(&emu, secrets, &dockercfg).await;
    assert_eq!(
        (status, refused["message"].as_str()),
        (
            422,
            Some("Secret \"bad\" is invalid: data[.dockercfg]: Required value")
        )
    );
    let (status, _) = get(&emu, &format!("{secrets}/bad")).await;
    assert_eq!(status, 404, "nothing refused is stored");

    // A JSON object passes; then every way of writing it is checked.
    let good = pull("good", json!({".dockerconfigjson": b64(r#"{"auths":{}}"#)}));
    let (status, created) = post(&emu, secrets, &good).await;
    assert_eq!(status, 201, "{created}");
    let path = format!("{secrets}/good");
    let mut replaced = created.clone();
    replaced["data"][".dockerconfigjson"] = json!(b64("not json"));
    let (status, refused) = put(&emu, &path, &replaced).await;
    assert_eq!((status, refused["reason"].as_str()), (422, Some("Invalid")));
    let (status, refused) = patch(
        &emu,
        &path,
        "application/merge-patch+json",
        r#"{"data":{".dockerconfigjson":null}}"#,
    )
    .await;
    assert_eq!(
        (status, refused["message"].as_str()),
        (
            422,
            Some("Secret \"good\" is invalid: data[.dockerconfigjson]: Required value")
        )
    );
    let (status, refused) = patch(
        &emu,
        &path,
        "application/json-patch+json",
        &json!([{"op": "replace", "path": "/data/.dockerconfigjson", "value": b64("[")}])
            .to_string(),
    )
    .await;
    assert_eq!((status, refused["reason"].as_str()), (422, Some("Invalid")));
    let applied = pull("good", json!({".dockerconfigjson": b64("auths")}));
    let (status, refused) = patch(
        &emu,
        &format!("{path}?fieldManager=test&force=true"),
        "application/apply-patch+yaml",
        &applied.to_string(),
    )
    .await;
    assert_eq!((status, refused["reason"].as_str()), (422, Some("Invalid")));
    let applied = pull("applied", json!({"other": b64("{}")}));
    let (status, refused) = patch(
        &emu,
        &format!("{secrets}/applied?fieldManager=test"),
        "application/apply-patch+yaml",
        &applied.to_string(),
    )
    .await;
    assert_eq!(
        (status, refused["reason"].as_str()),
        (422, Some("Invalid")),
        "an apply that creates is checked too"
    );
    let (_, unchanged) = get(&emu, &path).await;
    assert_eq!(unchanged["data"], good["data"]);

    // The type is immutable.
    let (status, refused) = patch(
        &emu,
        &path,
        "application/merge-patch+json",
        r#"{"type":"Opaque"}"#,
    )
    .await;
    assert_eq!(
        (status, refused["message"].as_str()),
        (
            422,
            Some("Secret \"good\" is invalid: type: Invalid value: \"Opaque\": field is immutable")
        )
    );
    assert_eq!(
        refused["details"]["causes"][0]["reason"],
        "FieldValueInvalid"
    );

    // stringData is written into data; the type defaults to Opaque.
    let (status, plain) = post(
        &emu,
        secrets,
        &json!({"metadata": {"name": "plain"}, "stringData": {"k": "v"}, "data": {"j": "dw=="}}),
    )
    .await;
    assert_eq!(status, 201, "{plain}");
    assert_eq!(plain["type"], "Opaque");
    assert_eq!(plain["data"], json!({"j": "dw==", "k": "dg=="}));
    assert!(plain.get("stringData").is_none(), "{plain}");
    let by_string = json!({"metadata": {"name": "by-string"},
                           "type": "kubernetes.io/dockerconfigjson",
                           "stringData": {".dockerconfigjson": "{\"auths\":{}}"}});
    let (status, created) = post(&emu, secrets, &by_string).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["data"][".dockerconfigjson"], b64(r#"{"auths":{}}"#));
    let (status, refused) = post(
        &emu,
        secrets,
        &json!({"metadata": {"name": "b64"}, "data": {"k": "dg!="}}),
    )
    .await;
    assert_eq!(
        (status, refused["reason"].as_str(), refused["message"].as_str()),
        (
            400,
            Some("BadRequest"),
            Some("Secret in version \"v1\" cannot be handled as a Secret: illegal base64 data at input byte 2")
        )
    );
    emu.stop();
}
