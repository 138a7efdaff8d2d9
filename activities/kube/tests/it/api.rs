//! kube-rs against the emulator: every API behaviour the activities rely on, as a real
//! API server would answer it.

use futures::{StreamExt, TryStreamExt};
use hcpflow_kube::resources::{hosted_clusters, node_pools};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::api::{
    DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams, WatchEvent,
    WatchParams,
};
use kube::{Api, ResourceExt};
use serde_json::json;

use crate::support::{stack, stack_keeping, unique};

fn status_of(error: kube::Error) -> (u16, String) {
    match error {
        kube::Error::Api(status) => (status.code, status.reason.clone()),
        other => panic!("expected an API error, got {other}"),
    }
}

async fn namespace(client: &kube::Client, name: &str) {
    let api: Api<Namespace> = Api::all(client.clone());
    api.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": name}})).unwrap(),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn version_and_discovery_find_core_and_hypershift_resources() {
    let stack = stack().await;
    stack.client.apiserver_version().await.unwrap();
    let discovery = kube::Discovery::new(stack.client.clone())
        .run()
        .await
        .unwrap();
    let group = discovery
        .get("hypershift.openshift.io")
        .expect("the hypershift group is discovered");
    let kinds: Vec<String> = group
        .recommended_resources()
        .into_iter()
        .map(|(resource, _)| resource.kind)
        .collect();
    assert!(kinds.contains(&"HostedCluster".to_owned()), "{kinds:?}");
    assert!(kinds.contains(&"NodePool".to_owned()), "{kinds:?}");
    assert!(discovery.has_group(""), "the core group is discovered");
}

#[tokio::test]
async fn create_get_list_update_and_patch_with_versions_conflicts_and_selectors() {
    let stack = stack().await;
    let ns = unique("api");
    namespace(&stack.client, &ns).await;
    let maps: Api<ConfigMap> = Api::namespaced(stack.client.clone(), &ns);
    let map = |name: &str, tier: &str| -> ConfigMap {
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"tier": tier}}, "data": {"a": "1"}
        }))
        .unwrap()
    };
    let first = maps
        .create(&PostParams::default(), &map("one", "front"))
        .await
        .unwrap();
    maps.create(&PostParams::default(), &map("two", "back"))
        .await
        .unwrap();
    assert!(first.uid().is_some());
    assert!(first.creation_timestamp().is_some());
    let (code, reason) = status_of(
        maps.create(&PostParams::default(), &map("one", "front"))
            .await
            .unwrap_err(),
    );
    assert_eq!((code, reason.as_str()), (409, "AlreadyExists"));

    let front = maps
        .list(&ListParams::default().labels("tier=front"))
        .await
        .unwrap();
    assert_eq!(front.items.len(), 1);
    assert!(front.metadata.resource_version.is_some());
    let by_name = maps
        .list(&ListParams::default().fields("metadata.name=two"))
        .await
        .unwrap();
    assert_eq!(by_name.items[0].name_any(), "two");

    // An update with the version read succeeds and moves the version on; the same
    // stale version again is a 409 Conflict.
    let mut changed = first.clone();
    changed.data = Some([("a".to_owned(), "2".to_owned())].into());
    let updated = maps
        .replace("one", &PostParams::default(), &changed)
        .await
        .unwrap();
    let before: u64 = first.resource_version().unwrap().parse().unwrap();
    let after: u64 = updated.resource_version().unwrap().parse().unwrap();
    assert!(after > before);
    let (code, reason) = status_of(
        maps.replace("one", &PostParams::default(), &changed)
            .await
            .unwrap_err(),
    );
    assert_eq!((code, reason.as_str()), (409, "Conflict"));

    let merged = maps
        .patch(
            "one",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"b": "3"}})),
        )
        .await
        .unwrap();
    assert_eq!(merged.data.unwrap().get("b").map(String::as_str), Some("3"));
    let (code, _) = status_of(maps.get("absent").await.unwrap_err());
    assert_eq!(code, 404);
}

#[tokio::test]
async fn server_side_apply_tracks_managers_conflicts_force_and_removal() {
    let stack = stack().await;
    let ns = unique("ssa");
    namespace(&stack.client, &ns).await;
    let maps: Api<ConfigMap> = Api::namespaced(stack.client.clone(), &ns);
    let doc = |data: serde_json::Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "shared"}, "data": data});
    // Apply creates what is absent, and records the manager.
    let created = maps
        .patch(
            "shared",
            &PatchParams::apply("alpha"),
            &Patch::Apply(doc(json!({"a": "1", "b": "1"}))),
        )
        .await
        .unwrap();
    let managers: Vec<String> = created
        .managed_fields()
        .iter()
        .filter_map(|m| m.manager.clone())
        .collect();
    assert_eq!(managers, vec!["alpha".to_owned()]);
    // Another manager setting a field alpha owns, to another value: 409 Conflict.
    let (code, reason) = status_of(
        maps.patch(
            "shared",
            &PatchParams::apply("beta"),
            &Patch::Apply(doc(json!({"a": "2"}))),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!((code, reason.as_str()), (409, "Conflict"));
    // Forced, beta takes the field over.
    let forced = maps
        .patch(
            "shared",
            &PatchParams::apply("beta").force(),
            &Patch::Apply(doc(json!({"a": "2"}))),
        )
        .await
        .unwrap();
    assert_eq!(forced.data.as_ref().unwrap()["a"], "2");
    // Alpha stops applying b: it is removed; a (now beta's) stays.
    let dropped = maps
        .patch(
            "shared",
            &PatchParams::apply("alpha"),
            &Patch::Apply(doc(json!({}))),
        )
        .await
        .unwrap();
    let data = dropped.data.unwrap_or_default();
    assert_eq!(data.get("a").map(String::as_str), Some("2"));
    assert!(!data.contains_key("b"), "{data:?}");
}

#[tokio::test]
async fn required_fields_status_scale_and_generation_behave_as_on_a_server() {
    let stack = stack().await;
    let ns = unique("crd");
    namespace(&stack.client, &ns).await;
    let clusters: Api<DynamicObject> =
        Api::namespaced_with(stack.client.clone(), &ns, &hosted_clusters());
    let incomplete: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "hypershift.openshift.io/v1beta1", "kind": "HostedCluster",
        "metadata": {"name": "broken"},
        "spec": {"release": {"image": "r"}, "platform": {"type": "AWS"}}
    }))
    .unwrap();
    let (code, reason) = status_of(
        clusters
            .create(&PostParams::default(), &incomplete)
            .await
            .unwrap_err(),
    );
    assert_eq!((code, reason.as_str()), (422, "Invalid"));

    let pools: Api<DynamicObject> = Api::namespaced_with(stack.client.clone(), &ns, &node_pools());
    let pool: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "hypershift.openshift.io/v1beta1", "kind": "NodePool",
        "metadata": {"name": "pool"},
        "spec": {"clusterName": "c", "replicas": 0, "release": {"image": "quay.io/ocp-release:4.17.0"},
                 "management": {"upgradeType": "Replace"},
                 "platform": {"type": "AWS", "aws": {"instanceType": "m5.large",
                              "subnet": {"id": "subnet-0abc"}}}},
        "status": {"replicas": 99}
    }))
    .unwrap();
    let created = pools.create(&PostParams::default(), &pool).await.unwrap();
    assert!(
        created.data.pointer("/status/replicas") != Some(&json!(99)),
        "status ignored on create"
    );
    assert_eq!(created.metadata.generation, Some(1));
    // Status only through /status, and it does not count as a spec change.
    let with_status = pools
        .patch_status(
            "pool",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"note": "x"}, "spec": {"replicas": 5}})),
        )
        .await
        .unwrap();
    assert_eq!(with_status.data["status"]["note"], "x");
    assert_eq!(with_status.data["spec"]["replicas"], 0);
    assert_eq!(with_status.metadata.generation, Some(1));
    // Scale through /scale: spec.replicas changes, generation counts it.
    pools
        .patch_scale(
            "pool",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await
        .unwrap();
    let scale = pools.get_scale("pool").await.unwrap();
    assert_eq!(scale.spec.and_then(|s| s.replicas), Some(3));
    let after = pools.get("pool").await.unwrap();
    assert_eq!(after.data["spec"]["replicas"], 3);
    assert_eq!(after.metadata.generation, Some(2));
}

#[tokio::test]
async fn finalizers_hold_deletes_and_a_namespace_delete_cascades() {
    let stack = stack().await;
    let ns = unique("fin");
    namespace(&stack.client, &ns).await;
    let secrets: Api<Secret> = Api::namespaced(stack.client.clone(), &ns);
    let held: Secret = serde_json::from_value(json!({
        "metadata": {"name": "held", "finalizers": ["example.com/hold"]}
    }))
    .unwrap();
    secrets.create(&PostParams::default(), &held).await.unwrap();
    secrets
        .delete("held", &DeleteParams::default())
        .await
        .unwrap();
    let terminating = secrets.get("held").await.unwrap();
    assert!(terminating.metadata.deletion_timestamp.is_some());
    secrets
        .patch(
            "held",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    assert!(secrets.get_opt("held").await.unwrap().is_none());

    let plain: Secret = serde_json::from_value(json!({"metadata": {"name": "plain"}})).unwrap();
    secrets
        .create(&PostParams::default(), &plain)
        .await
        .unwrap();
    let namespaces: Api<Namespace> = Api::all(stack.client.clone());
    namespaces
        .delete(&ns, &DeleteParams::default())
        .await
        .unwrap();
    for _ in 0..100 {
        if namespaces.get_opt(&ns).await.unwrap().is_none() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(namespaces.get_opt(&ns).await.unwrap().is_none());
    assert!(secrets.get_opt("plain").await.unwrap().is_none());
}

#[tokio::test]
async fn a_watch_resumes_from_a_version_and_a_forgotten_version_is_gone() {
    let stack = stack().await;
    let ns = unique("watch");
    namespace(&stack.client, &ns).await;
    let maps: Api<ConfigMap> = Api::namespaced(stack.client.clone(), &ns);
    let first = maps
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "w"}})).unwrap(),
        )
        .await
        .unwrap();
    let version = first.resource_version().unwrap();
    maps.patch(
        "w",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "v"}})),
    )
    .await
    .unwrap();
    maps.delete("w", &DeleteParams::default()).await.unwrap();
    // From the create's version: the change and the delete after it, nothing before.
    let events: Vec<WatchEvent<ConfigMap>> = maps
        .watch(&WatchParams::default().timeout(1), &version)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| match e {
            WatchEvent::Added(_) => "ADDED",
            WatchEvent::Modified(_) => "MODIFIED",
            WatchEvent::Deleted(_) => "DELETED",
            WatchEvent::Bookmark(_) => "BOOKMARK",
            WatchEvent::Error(_) => "ERROR",
        })
        .filter(|k| *k != "BOOKMARK")
        .collect();
    assert_eq!(kinds, vec!["MODIFIED", "DELETED"]);

    // A version from before what the server keeps: an ERROR event with 410 Gone.
    let stack = stack_keeping(3).await;
    namespace(&stack.client, &ns).await;
    let maps: Api<ConfigMap> = Api::namespaced(stack.client.clone(), &ns);
    let first = maps
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "w"}})).unwrap(),
        )
        .await
        .unwrap();
    for n in 0..5 {
        maps.patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"n": n.to_string()}})),
        )
        .await
        .unwrap();
    }
    let mut stream = maps
        .watch(
            &WatchParams::default().timeout(1),
            &first.resource_version().unwrap(),
        )
        .await
        .unwrap()
        .boxed();
    match stream.next().await {
        Some(Ok(WatchEvent::Error(status))) => assert_eq!(status.code, 410),
        other => panic!("expected a 410 error event, got {other:?}"),
    }
}
