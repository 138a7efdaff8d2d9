//! Tenants (issue 19): each workflow belongs to the tenant whose subjects started it,
//! and every read and write through the API is scoped to the caller's tenant.

use std::time::Duration;

use futures::StreamExt;
use serde_json::{json, Value};

use crate::support::{stack, unique, Server};

fn code(reply: &Value) -> &str {
    reply["error"]["code"].as_str().unwrap_or("")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_sees_and_touches_only_its_own_workflows() {
    let Some(env) = stack("a_tenant_sees_and_touches_only_its_own_workflows") else {
        return;
    };
    let _shared = crate::support::shared().await;
    let prefix = unique("tenants");
    let server = Server::start(env, &prefix, &[]).await;
    let id = format!("{prefix}-acme");
    // Its events go to the tenant's subjects.
    let mut events = server
        .client
        .subscribe(format!("{prefix}.events.acme.{id}"))
        .await
        .unwrap();
    let started = server
        .api(
            "acme.start",
            json!({"workflow_type": "noop_chain", "workflow_id": id,
                   "input": {"steps": 30, "sleep_ms": 100}}),
        )
        .await;
    assert_eq!(started["status"], "started", "{started}");
    let first = tokio::time::timeout(Duration::from_secs(10), events.next())
        .await
        .expect("an event on the tenant's events subject")
        .unwrap();
    assert!(first.subject.as_str().ends_with(&id));

    let acme = server
        .api("acme.describe", json!({"workflow_id": id}))
        .await;
    assert_eq!(acme["workflow"]["workflow_id"], id, "{acme}");
    // Every other tenant — the default one included — finds nothing.
    for other in ["", "globex.", "default."] {
        for (verb, body) in [
            ("describe", json!({"workflow_id": id})),
            ("history", json!({"workflow_id": id})),
            ("verify", json!({"workflow_id": id})),
            (
                "signal",
                json!({"workflow_id": id, "signal": "s", "payload": 1}),
            ),
            ("cancel", json!({"workflow_id": id})),
        ] {
            let reply = server.api(&format!("{other}{verb}"), body).await;
            assert_eq!(code(&reply), "not_found", "{other}{verb}: {reply}");
        }
        let listed = server.api(&format!("{other}list"), json!({})).await;
        let ids: Vec<&str> = listed["workflows"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|w| w["workflow_id"].as_str())
            .collect();
        assert!(!ids.contains(&id.as_str()), "{other}list: {listed}");
        // Its id is taken, and nothing more is said of it.
        let taken = server
            .api(
                &format!("{other}start"),
                json!({"workflow_type": "noop_chain", "workflow_id": id,
                       "input": {"steps": 30, "sleep_ms": 100}}),
            )
            .await;
        assert_eq!(code(&taken), "conflict", "{taken}");
        assert!(!taken.to_string().contains("already_started"));
    }
    // Other tests' servers share the database and may start workflows of tenant acme
    // meanwhile: of this test's own, its workflow is listed first.
    let listed = server.api("acme.list", json!({})).await;
    let own: Vec<&str> = listed["workflows"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|w| w["workflow_id"].as_str())
        .filter(|w| w.starts_with(&prefix))
        .collect();
    assert_eq!(own.first(), Some(&id.as_str()), "{listed}");
    // The tenant itself can act on it.
    let cancelled = server.api("acme.cancel", json!({"workflow_id": id})).await;
    assert_eq!(cancelled["status"], "cancel_requested", "{cancelled}");

    // A tenant that is not a valid subject token is refused.
    let bad = server.api("ACME.list", json!({})).await;
    assert_eq!(code(&bad), "invalid_request", "{bad}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_submission_belongs_to_the_tenant_of_its_subject() {
    let Some(env) = stack("a_submission_belongs_to_the_tenant_of_its_subject") else {
        return;
    };
    let _shared = crate::support::shared().await;
    let prefix = unique("tenantsub");
    let server = Server::start(env, &prefix, &[]).await;
    let id = format!("{prefix}-s");
    let js = async_nats::jetstream::new(server.client.clone());
    let body = json!({"workflow_type": "noop_chain", "workflow_id": id, "input": {"steps": 1}});
    js.publish(
        format!("{prefix}.submit.v1.acme.start"),
        serde_json::to_vec(&body).unwrap().into(),
    )
    .await
    .unwrap()
    .await
    .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let reply = server
            .api("acme.describe", json!({"workflow_id": id}))
            .await;
        if reply["workflow"]["status"] == "completed" {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{reply}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let default = server.api("describe", json!({"workflow_id": id})).await;
    assert_eq!(code(&default), "not_found", "{default}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_destroy_is_its_own_verb() {
    let Some(env) = stack("a_destroy_is_its_own_verb") else {
        return;
    };
    let _shared = crate::support::shared().await;
    let prefix = unique("destroyverb");
    let server = Server::start(env, &prefix, &[]).await;
    let destroy = json!({"workflow_type": "destroy_hosted_cluster",
                         "workflow_id": format!("{prefix}-d"), "input": {"cluster": "nope"}});
    let through_start = server.api("start", destroy.clone()).await;
    assert_eq!(code(&through_start), "invalid_request", "{through_start}");
    assert!(
        through_start.to_string().contains("destroy verb"),
        "{through_start}"
    );
    let not_destroying = server
        .api(
            "destroy",
            json!({"workflow_type": "noop_chain", "input": {"steps": 1}}),
        )
        .await;
    assert_eq!(code(&not_destroying), "invalid_request", "{not_destroying}");
    assert!(
        not_destroying
            .to_string()
            .contains("destroy_hosted_cluster"),
        "{not_destroying}"
    );
    // Nothing was recorded for either.
    let described = server
        .api("describe", json!({"workflow_id": format!("{prefix}-d")}))
        .await;
    assert_eq!(code(&described), "not_found", "{described}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workflow_never_reaches_another_tenants_cluster_registered_after_it_started() {
    use hcpflow_engine::event::{WorkflowCompleted, WorkflowStarted};
    use hcpflow_engine::{Event, Seq, TenantId, WorkflowId, WorkflowStatus};
    use hcpflow_eventstore::{AppendBatch, NewWorkflow};
    let Some(env) =
        stack("a_workflow_never_reaches_another_tenants_cluster_registered_after_it_started")
    else {
        return;
    };
    let _shared = crate::support::shared().await;
    let prefix = unique("tenantreg");
    let server = Server::start(env, &prefix, &[]).await;
    let name = crate::cluster_support::cluster_name("treg");
    // Tenant acme's create of the name is running (not yet registered), holding the
    // name's concurrency key; it is written straight to the store, as a server would.
    let create = WorkflowId::new(format!("{prefix}-acme-create")).unwrap();
    let started: Event = WorkflowStarted {
        workflow_type: "create_hosted_cluster".into(),
        input: json!({"name": name}),
        concurrency_key: Some(name.clone()),
        parent: None,
    }
    .into();
    server
        .store
        .create_workflow(
            &NewWorkflow {
                workflow_type: "create_hosted_cluster".into(),
                status: WorkflowStatus::Running,
                concurrency_key: Some(name.clone()),
                parent_id: None,
                input_digest: None,
                events_subject: None,
                tenant: TenantId::new("acme").unwrap(),
            },
            AppendBatch::new(
                create.clone(),
                Seq::FIRST,
                crate::histories::new_events(&[started]),
            ),
        )
        .await
        .unwrap();
    // Tenant globex asks to scale a cluster of that name: there is none yet, so the
    // start is taken, and waits for the name's key.
    let scale = format!("{prefix}-globex-scale");
    let reply = server
        .api(
            "globex.start",
            json!({"workflow_type": "scale_node_pool", "workflow_id": scale,
                   "input": {"cluster": name, "node_pool": format!("{name}-a"), "replicas": 2}}),
        )
        .await;
    assert_eq!(reply["status"], "started", "{reply}");
    // acme's create registers the name and ends; globex's scale runs.
    server
        .store
        .register_cluster(&name, &format!("{name}-x1"), "clusters", &create)
        .await
        .unwrap();
    let completed: Event = WorkflowCompleted { output: json!({}) }.into();
    server
        .store
        .append(
            AppendBatch::new(
                create.clone(),
                Seq::new(2).unwrap(),
                crate::histories::new_events(&[completed]),
            )
            .with_status(WorkflowStatus::Completed),
        )
        .await
        .unwrap();
    crate::histories::wake(&server, &scale).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let described = loop {
        let described = server
            .api("globex.describe", json!({"workflow_id": scale}))
            .await;
        let status = described["workflow"]["status"].as_str().unwrap_or("");
        if ["failed", "completed", "compensated", "blocked"].contains(&status) {
            break described;
        }
        assert!(tokio::time::Instant::now() < deadline, "{described}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(described["workflow"]["status"], "failed", "{described}");
    let error = described["workflow"]["error"].to_string();
    assert!(error.contains("no live cluster named"), "{error}");
    // Nothing of acme's create reached globex's history.
    let history = server
        .api(
            "globex.history",
            json!({"workflow_id": scale, "limit": 1000}),
        )
        .await;
    assert!(
        !history.to_string().contains(&format!("{name}-x1")),
        "{history}"
    );
}

/// Another tenant's live cluster is not there for a tenant: its destroy and its scale
/// are `not_found` before anything is recorded, and its cluster list leaves it out,
/// while the owner sees it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_tenants_live_cluster_cannot_be_destroyed_scaled_or_listed() {
    use hcpflow_engine::event::{WorkflowCompleted, WorkflowStarted};
    use hcpflow_engine::{Event, Seq, TenantId, WorkflowId, WorkflowStatus};
    use hcpflow_eventstore::{AppendBatch, NewWorkflow};
    let Some(env) = stack("another_tenants_live_cluster_cannot_be_destroyed_scaled_or_listed")
    else {
        return;
    };
    let _shared = crate::support::shared().await;
    let prefix = unique("tenantlive");
    let server = Server::start(env, &prefix, &[]).await;
    let name = crate::cluster_support::cluster_name("tlive");
    // acme's create of the name, ended and registered, written straight to the store
    // as a server would have.
    let create = WorkflowId::new(format!("{prefix}-acme-create")).unwrap();
    let events: Vec<Event> = vec![
        WorkflowStarted {
            workflow_type: "create_hosted_cluster".into(),
            input: json!({"name": name}),
            concurrency_key: Some(name.clone()),
            parent: None,
        }
        .into(),
        WorkflowCompleted { output: json!({}) }.into(),
    ];
    server
        .store
        .create_workflow(
            &NewWorkflow {
                workflow_type: "create_hosted_cluster".into(),
                status: WorkflowStatus::Completed,
                concurrency_key: Some(name.clone()),
                parent_id: None,
                input_digest: None,
                events_subject: None,
                tenant: TenantId::new("acme").unwrap(),
            },
            AppendBatch::new(
                create.clone(),
                Seq::FIRST,
                crate::histories::new_events(&events),
            )
            .with_status(WorkflowStatus::Completed),
        )
        .await
        .unwrap();
    server
        .store
        .register_cluster(&name, &format!("{name}-x1"), "clusters", &create)
        .await
        .unwrap();

    let destroy = format!("{prefix}-globex-destroy");
    let refused = server
        .api(
            "globex.destroy",
            json!({"workflow_type": "destroy_hosted_cluster", "workflow_id": destroy,
                   "input": {"cluster": name}}),
        )
        .await;
    assert_eq!(code(&refused), "not_found", "{refused}");
    let scale = format!("{prefix}-globex-scale");
    let refused = server
        .api(
            "globex.start",
            json!({"workflow_type": "scale_node_pool", "workflow_id": scale,
                   "input": {"cluster": name, "node_pool": format!("{name}-a"), "replicas": 2}}),
        )
        .await;
    assert_eq!(code(&refused), "not_found", "{refused}");
    for id in [&destroy, &scale] {
        let described = server
            .api("globex.describe", json!({"workflow_id": id}))
            .await;
        assert_eq!(code(&described), "not_found", "{described}");
    }
    let listed = |reply: &serde_json::Value| {
        reply["clusters"]
            .as_array()
            .map(|clusters| clusters.iter().any(|c| c["name"] == name.as_str()))
            .unwrap_or(false)
    };
    let theirs = server.api("globex.clusters", json!({})).await;
    assert!(!listed(&theirs), "{theirs}");
    let own = server.api("acme.clusters", json!({})).await;
    assert!(listed(&own), "{own}");
}
