//! No plaintext secret anywhere hcpflow keeps or sends things: canaries planted in the
//! pull secrets of three creates (and destroys) — one inline, one by reference to a
//! Secret on the management cluster, one by reference to AWS Secrets Manager — and the
//! generated etcd encryption key and service-account signing key read back from the
//! management cluster, are searched for in every table, every message published under
//! the server's prefix (after intake, for the inline one; everywhere, start requests
//! included, for the references), and the server's debug log. The search is shown to
//! work on values that are there. A tenant not granted a reference is refused it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use serde_json::json;
use sqlx::{Connection, Row};

use crate::cluster_support::{cluster_name, cluster_stack, create_input, prerequisites};
use crate::support::{env_value, unique, Server};

/// Where each needle was found: `(needle label, place)`.
fn find(needles: &[(String, String)], haystack: &str, place: &str, found: &mut Vec<String>) {
    for (label, needle) in needles {
        if haystack.contains(needle.as_str()) {
            found.push(format!("{label} in {place}"));
        }
    }
}

/// Each secret as text, and as the hex a bytea column shows it in.
fn needles(label: &str, value: &[u8]) -> Vec<(String, String)> {
    let mut out = vec![(format!("{label} (hex)"), hex::encode(value))];
    if let Ok(text) = std::str::from_utf8(value) {
        out.push((label.to_owned(), text.to_owned()));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_plaintext_secret_reaches_tables_streams_or_logs() {
    let Some(stack) = cluster_stack("no_plaintext_secret_reaches_tables_streams_or_logs").await
    else {
        return;
    };
    if std::env::var("HCPFLOW_DATABASE_SUPERUSER_URL").is_err() {
        assert!(std::env::var_os("HCPFLOW_REQUIRE_STACK").is_none());
        return;
    }
    let _shared = crate::support::shared().await;
    let tag = unique("sec").to_lowercase();
    let pre = prerequisites(&stack.moto, &tag).await;
    let prefix = unique("sec");
    let log = std::env::temp_dir().join(format!("hcpflow-{prefix}.log"));
    let mut env = stack.env.clone();
    env.retain(|(k, _)| k != "AWS_ACCESS_KEY_ID");
    env.push(("AWS_ACCESS_KEY_ID".into(), format!("{prefix}-key")));

    // The referenced pull secrets, and the grants that let the default tenant read them.
    let dockerconfig =
        |canary: &str| format!("{{\"auths\": {{\"quay.io\": {{\"auth\": \"{canary}\"}}}}}}");
    let k8s_canary = format!("CANARYK8S{}", unique("ref").to_uppercase());
    let sm_canary = format!("CANARYSM{}", unique("ref").to_uppercase());
    let refs_namespace = cluster_name("pull");
    let k8s_ref = json!({"kubernetes": {"namespace": refs_namespace, "name": "team-pull"}});
    put_kubernetes_secret(
        &stack.kube,
        &refs_namespace,
        "team-pull",
        &dockerconfig(&k8s_canary),
    )
    .await;
    let arn = aws_sdk_secretsmanager::Client::new(&stack.moto.sdk)
        .create_secret()
        .name(format!("{prefix}/pull"))
        .secret_string(dockerconfig(&sm_canary))
        .send()
        .await
        .unwrap()
        .arn
        .unwrap();
    let sm_ref = json!({"aws_secrets_manager": {"arn": arn}});
    let (arn_prefix, _) = arn.rsplit_once(':').unwrap();
    env.push((
        "HCPFLOW_ALLOW_SECRET_REFS".into(),
        format!("default=kubernetes:{refs_namespace},default={arn_prefix}:{prefix}/*"),
    ));

    // Everything published under the prefix, from before the server starts.
    let watcher = async_nats::connect(env_value(&env, "HCPFLOW_NATS_URL"))
        .await
        .unwrap();
    let mut published = watcher.subscribe(format!("{prefix}.>")).await.unwrap();
    let collected: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
    let collector = {
        let collected = collected.clone();
        tokio::spawn(async move {
            while let Some(message) = published.next().await {
                collected.lock().unwrap().push((
                    message.subject.to_string(),
                    String::from_utf8_lossy(&message.payload).into_owned(),
                ));
            }
        })
    };
    let server = Server::start_logged(env.clone(), &prefix, log.clone()).await;

    let canary = format!("CANARY{}", unique("pull").to_uppercase());
    let name = cluster_name("sec");
    let by_k8s = cluster_name("seck");
    let by_sm = cluster_name("secm");
    let mut creates = Vec::new();
    for (cluster, field, value) in [
        (&name, "pull_secret", json!(dockerconfig(&canary))),
        (&by_k8s, "pull_secret_ref", k8s_ref.clone()),
        (&by_sm, "pull_secret_ref", sm_ref),
    ] {
        let mut input = create_input(cluster, &pre, 1);
        input.as_object_mut().unwrap().remove("pull_secret");
        input[field] = value;
        let create = format!("{prefix}-create-{cluster}");
        let reply = server
            .start_workflow("create_hosted_cluster", &create, input)
            .await;
        assert_eq!(reply["ok"], true, "{reply}");
        creates.push(create);
    }
    for create in &creates {
        assert_eq!(
            server.wait_terminal(create, Duration::from_secs(400)).await,
            "completed",
            "{create}"
        );
    }
    let create = &creates[0];

    // A reference the tenant is not granted is refused before anything is recorded:
    // another tenant naming the granted Secret, or the granted tenant another namespace.
    let mut theirs = create_input(&cluster_name("secx"), &pre, 1);
    theirs.as_object_mut().unwrap().remove("pull_secret");
    theirs["pull_secret_ref"] = k8s_ref;
    let request = |input: &serde_json::Value| json!({"workflow_type": "create_hosted_cluster", "input": input});
    let refused = server.api("other.start", request(&theirs)).await;
    assert_eq!(refused["error"]["code"], "forbidden", "{refused}");
    theirs["pull_secret_ref"] =
        json!({"kubernetes": {"namespace": "kube-system", "name": "bootstrap-token"}});
    let refused = server.api("start", request(&theirs)).await;
    assert_eq!(refused["error"]["code"], "forbidden", "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains(&format!("kubernetes:{refs_namespace}")),
        "{refused}"
    );

    // The generated secrets, as the management cluster holds them (where they belong).
    let secrets: Api<Secret> = Api::namespaced(stack.kube.clone(), &format!("ns-{name}"));
    let value = |secret: &str, key: &str| {
        let secrets = secrets.clone();
        let (secret, key) = (secret.to_owned(), key.to_owned());
        async move {
            secrets.get(&secret).await.unwrap().data.unwrap()[&key]
                .0
                .clone()
        }
    };
    let pull = value(&format!("{name}-pull-secret"), ".dockerconfigjson").await;
    assert!(
        String::from_utf8_lossy(&pull).contains(&canary),
        "the canary reached the management cluster, where it belongs"
    );
    for (cluster, canary) in [(&by_k8s, &k8s_canary), (&by_sm, &sm_canary)] {
        let secrets: Api<Secret> = Api::namespaced(stack.kube.clone(), &format!("ns-{cluster}"));
        let pull = secrets
            .get(&format!("{cluster}-pull-secret"))
            .await
            .unwrap()
            .data
            .unwrap()[".dockerconfigjson"]
            .0
            .clone();
        assert!(
            String::from_utf8_lossy(&pull).contains(canary.as_str()),
            "{cluster}: the referenced pull secret was written into the hosted cluster's namespace"
        );
    }
    let etcd = value(&format!("{name}-etcd-encryption-key"), "key").await;
    let signing = value(&format!("{name}-sa-token-issuer-key"), "key").await;
    let signing_pem = String::from_utf8(signing).unwrap();
    let signing_line = signing_pem
        .lines()
        .filter(|l| l.len() == 64)
        .nth(5)
        .expect("a PEM body line")
        .to_owned();
    let mut needles_all = needles("the pull-secret canary", canary.as_bytes());
    needles_all.extend(needles(
        "the etcd encryption key",
        base64::engine::general_purpose::STANDARD
            .encode(&etcd)
            .as_bytes(),
    ));
    needles_all.push(("the etcd encryption key (hex)".into(), hex::encode(&etcd)));
    needles_all.extend(needles("the signing key", signing_line.as_bytes()));

    // Never anywhere, the start requests included: they carried only the references.
    let mut reference_needles = needles("the Kubernetes-referenced canary", k8s_canary.as_bytes());
    reference_needles.extend(needles("the Secrets Manager canary", sm_canary.as_bytes()));

    for cluster in [&name, &by_k8s, &by_sm] {
        let destroy = format!("{prefix}-destroy-{cluster}");
        server
            .start_workflow(
                "destroy_hosted_cluster",
                &destroy,
                json!({"cluster": cluster}),
            )
            .await;
        assert_eq!(
            server
                .wait_terminal(&destroy, Duration::from_secs(300))
                .await,
            "completed"
        );
    }
    tokio::time::sleep(Duration::from_secs(3)).await; // the final checkpoints
    drop(server);
    collector.abort();

    let mut found = Vec::new();
    // Every table, every row, bytea columns as hex.
    let mut db = sqlx::PgConnection::connect(&env_value(&env, "HCPFLOW_DATABASE_SUPERUSER_URL"))
        .await
        .unwrap();
    let tables: Vec<String> =
        sqlx::query_scalar("SELECT tablename::text FROM pg_tables WHERE schemaname = 'public'")
            .fetch_all(&mut db)
            .await
            .unwrap();
    assert!(
        tables.iter().any(|t| t == "events") && tables.len() >= 7,
        "{tables:?}"
    );
    let mut searched_rows = 0usize;
    for table in &tables {
        let rows = sqlx::query(&format!("SELECT row_to_json(t)::text FROM {table} t"))
            .fetch_all(&mut db)
            .await
            .unwrap();
        for row in rows {
            let text: String = row.get(0);
            searched_rows += 1;
            find(&needles_all, &text, &format!("table {table}"), &mut found);
            find(
                &reference_needles,
                &text,
                &format!("table {table}"),
                &mut found,
            );
        }
    }
    // The search sees what is there: the infra id is in the events, as hex bytes.
    let infra_hex = hex::encode(format!("\"name\":\"{name}\""));
    let events_text: Vec<String> =
        sqlx::query_scalar("SELECT row_to_json(t)::text FROM events t WHERE workflow_id = $1")
            .bind(create)
            .fetch_all(&mut db)
            .await
            .unwrap();
    assert!(
        events_text.iter().any(|t| t.contains(&infra_hex)),
        "the search finds stored values"
    );

    // Every message published after intake (the start request itself carries the
    // secret to intake: that is what intake seals).
    let messages = std::mem::take(&mut *collected.lock().unwrap());
    assert!(messages.len() > 100, "{} messages seen", messages.len());
    for (subject, payload) in &messages {
        find(
            &reference_needles,
            payload,
            &format!("NATS subject {subject}"),
            &mut found,
        );
        if subject == &format!("{prefix}.api.v1.start") {
            continue;
        }
        find(
            &needles_all,
            payload,
            &format!("NATS subject {subject}"),
            &mut found,
        );
    }
    assert!(
        messages
            .iter()
            .any(|(s, _)| s.starts_with(&format!("{prefix}.audit."))),
        "the witness stream's messages are searched too"
    );

    // The server's debug log.
    let log_text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(!log_text.is_empty(), "the server logged at debug level");
    find(&needles_all, &log_text, "the server log", &mut found);
    find(&reference_needles, &log_text, "the server log", &mut found);

    assert!(
        found.is_empty(),
        "plaintext secrets found ({searched_rows} rows, {} messages searched): {found:?}",
        messages.len()
    );
    let _ = std::fs::remove_file(&log);
}

/// The grant is checked again where the value is read: an activity worker whose grants
/// are narrower than the API's refuses the reference the API admitted, and the create
/// fails (and is rolled back) without the value ever being read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reference_is_checked_again_where_it_is_read() {
    use crate::histories::history;

    let Some(stack) = cluster_stack("a_reference_is_checked_again_where_it_is_read").await else {
        return;
    };
    let _shared = crate::support::shared().await;
    let prefix = unique("narrow");
    let pre = prerequisites(&stack.moto, &prefix.to_lowercase()).await;
    let namespace = cluster_name("pulln");
    put_kubernetes_secret(&stack.kube, &namespace, "team-pull", r#"{"auths": {}}"#).await;
    let with_grants = |grants: &str| {
        let mut env = stack.env.clone();
        env.push(("HCPFLOW_ALLOW_SECRET_REFS".into(), grants.to_owned()));
        env
    };
    let api = Server::start_worker(
        with_grants(&format!("default=kubernetes:{namespace}")),
        &prefix,
        "api,workflow,relay,timer",
        &[],
    )
    .await;
    let _narrower = Server::start_worker(
        with_grants("default=kubernetes:somewhere-else"),
        &prefix,
        "activity",
        &[],
    )
    .await;
    let name = cluster_name("narrow");
    let mut input = create_input(&name, &pre, 1);
    input.as_object_mut().unwrap().remove("pull_secret");
    input["pull_secret_ref"] = json!({"kubernetes": {"namespace": namespace, "name": "team-pull"}});
    let create = format!("{prefix}-create");
    let started = api
        .start_workflow("create_hosted_cluster", &create, input)
        .await;
    assert_eq!(started["ok"], true, "{started}");
    let ended = api.wait_terminal(&create, Duration::from_secs(300)).await;
    let events = history(&api, &create).await;
    assert_ne!(ended, "completed", "{events:?}");
    let refused = events
        .iter()
        .find(|e| {
            e["type"] == "ActivityFailed" && e["data"]["failure"]["kind"] == "SecretRefForbidden"
        })
        .unwrap_or_else(|| panic!("no SecretRefForbidden failure: {events:?}"));
    assert!(refused["data"]["retry_at"].is_null(), "{refused}");
    let message = refused["data"]["failure"]["message"].as_str().unwrap();
    assert!(message.contains("kubernetes:somewhere-else"), "{message}");
}

/// A `kubernetes.io/dockerconfigjson` Secret in a namespace of its own, as a platform
/// team keeps its pull secrets on the management cluster.
async fn put_kubernetes_secret(kube: &kube::Client, namespace: &str, name: &str, document: &str) {
    use k8s_openapi::api::core::v1::Namespace;
    use kube::api::PostParams;
    let namespaces: Api<Namespace> = Api::all(kube.clone());
    let mut created = Namespace::default();
    created.metadata.name = Some(namespace.to_owned());
    namespaces
        .create(&PostParams::default(), &created)
        .await
        .unwrap();
    let mut secret = Secret::default();
    secret.metadata.name = Some(name.to_owned());
    secret.type_ = Some("kubernetes.io/dockerconfigjson".into());
    secret.data = Some(
        [(
            ".dockerconfigjson".to_owned(),
            k8s_openapi::ByteString(document.as_bytes().to_vec()),
        )]
        .into(),
    );
    Api::<Secret>::namespaced(kube.clone(), namespace)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
}
