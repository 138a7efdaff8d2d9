//! NATS permissions (issue 19): every process under its own user of the configuration
//! `hcpflow nats permissions` generates, on a nats-server started with it; what a role
//! may not do, NATS refuses.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hcpflow_engine::TenantId;
use hcpflow_protocol::{StreamRole, Subjects};
use hcpflow_workers::cli::nats_permissions::{Deployment, NatsUser};
use serde_json::{json, Value};

use crate::auth::PrivateNats;
use crate::cluster_support::{cluster_name, cluster_stack, create_input, prerequisites};
use crate::support::{unique, Server};

/// The deployment's users, each with its password.
struct Users {
    by_name: BTreeMap<String, NatsUser>,
}

impl Users {
    fn get(&self, name: &str) -> &NatsUser {
        self.by_name
            .get(name)
            .unwrap_or_else(|| panic!("no user {name}"))
    }

    fn password(user: &NatsUser) -> String {
        format!("pw-{}", user.name)
    }

    /// nats-server's environment: every user's password under its variable.
    fn server_env(&self) -> Vec<(String, String)> {
        self.by_name
            .values()
            .map(|user| (user.password_variable(), Self::password(user)))
            .collect()
    }

    /// An hcpflow process's environment, as `name`: its NATS user, password and inbox.
    fn process_env(
        &self,
        env: &[(String, String)],
        url: &str,
        name: &str,
    ) -> Vec<(String, String)> {
        let user = self.get(name);
        let mut env: Vec<(String, String)> = env
            .iter()
            .filter(|(key, _)| !key.starts_with("HCPFLOW_NATS_"))
            .cloned()
            .collect();
        env.extend([
            ("HCPFLOW_NATS_URL".to_owned(), url.to_owned()),
            ("HCPFLOW_NATS_USER".to_owned(), user.name.clone()),
            ("HCPFLOW_NATS_PASSWORD".to_owned(), Self::password(user)),
            ("HCPFLOW_NATS_INBOX_PREFIX".to_owned(), user.inbox_prefix()),
        ]);
        env
    }

    fn options(&self, name: &str) -> async_nats::ConnectOptions {
        let user = self.get(name);
        async_nats::ConnectOptions::with_user_and_password(user.name.clone(), Self::password(user))
            .custom_inbox_prefix(user.inbox_prefix())
    }
}

/// A client as `name`, with the errors NATS reports to it (permission violations).
async fn client_as(
    users: &Users,
    url: &str,
    name: &str,
) -> (async_nats::Client, Arc<Mutex<Vec<String>>>) {
    let errors = Arc::new(Mutex::new(Vec::new()));
    let seen = errors.clone();
    let client = users
        .options(name)
        .event_callback(move |event| {
            let seen = seen.clone();
            async move {
                if let async_nats::Event::ServerError(error) = event {
                    seen.lock().unwrap().push(error.to_string());
                }
            }
        })
        .connect(url)
        .await
        .unwrap_or_else(|e| panic!("{name} connects: {e}"));
    (client, errors)
}

/// A request and its JSON reply, if one comes within 3 s.
async fn ask(client: &async_nats::Client, subject: String, body: Value) -> Option<Value> {
    let reply = tokio::time::timeout(
        Duration::from_secs(3),
        client.request(subject, serde_json::to_vec(&body).unwrap().into()),
    )
    .await
    .ok()?
    .ok()?;
    serde_json::from_slice(&reply.payload).ok()
}

/// Waits until the reader sees `id` end; its status.
async fn ended(
    reader: &async_nats::Client,
    subjects: &Subjects,
    id: &str,
    limit: Duration,
) -> String {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let described = ask(reader, subjects.api("describe"), json!({"workflow_id": id}))
            .await
            .expect("the reader's describe is answered");
        let status = described["workflow"]["status"].as_str().unwrap_or("?");
        if ["completed", "failed", "compensated", "cancelled", "blocked"].contains(&status) {
            return status.to_owned();
        }
        assert!(tokio::time::Instant::now() < deadline, "{described}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Waits until NATS has reported a violation on `subject` to that client.
async fn violated(errors: &Arc<Mutex<Vec<String>>>, subject: &str) {
    for _ in 0..50 {
        if errors
            .lock()
            .unwrap()
            .iter()
            .any(|e| e.contains("Permissions Violation") && e.contains(subject))
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "NATS reported no violation on {subject}: {:?}",
        errors.lock().unwrap()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_role_under_its_own_user_can_do_its_work_and_nothing_else() {
    let Some(stack) =
        cluster_stack("every_role_under_its_own_user_can_do_its_work_and_nothing_else").await
    else {
        return;
    };
    let env = stack.env.clone();
    let _stack = crate::support::shared().await;
    let prefix = unique("perm");
    let subjects = Subjects::new(&prefix).unwrap();
    let acme = TenantId::new("acme").unwrap();
    let deployment = Deployment {
        subjects: subjects.clone(),
        tenants: vec![TenantId::default_tenant(), acme.clone()],
        task_queues: vec!["default".into()],
    };
    let users = Users {
        by_name: deployment
            .users()
            .into_iter()
            .map(|user| (user.name.clone(), user))
            .collect(),
    };
    let name = |role: &str| format!("{prefix}-{role}");
    let dir = std::env::temp_dir().join(unique("nats-perm"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("accounts.conf"), deployment.render()).unwrap();
    std::fs::write(dir.join("nats.conf"), "include \"accounts.conf\"\n").unwrap();
    let config = dir.join("nats.conf");
    let reader = name("default-reader");
    let nats = PrivateNats::start_with_env(
        &env,
        dir,
        "nats",
        &["-c", config.to_str().unwrap()],
        &users.server_env(),
        || users.options(&reader),
    )
    .await;

    // `migrate`, as the migrate user, makes the streams (with the database owner's URL).
    let migrated = crate::support::hcpflow(
        &["migrate", "--prefix", &prefix],
        users.process_env(&env, &nats.url, &name("migrate")),
    )
    .output()
    .await
    .unwrap();
    assert!(
        migrated.status.success(),
        "{}",
        String::from_utf8_lossy(&migrated.stderr)
    );

    // Every runtime role in a process of its own, under its own user, without the
    // owner's database URL (so none of them may make a stream).
    let mut processes = Vec::new();
    for role in ["api", "workflow", "activity", "relay", "timer"] {
        let mut env = users.process_env(&env, &nats.url, &name(role));
        env.retain(|(key, _)| key != "HCPFLOW_DATABASE_ADMIN_URL");
        let (probe, _) = client_as(&users, &nats.url, &reader).await;
        processes.push(Server::start_worker_with_client(env, &prefix, role, &[], probe).await);
    }

    // An operator starts a workflow; it runs to the end through every role.
    let (operator, operator_errors) = client_as(&users, &nats.url, &name("default-operator")).await;
    let (reader_client, reader_errors) = client_as(&users, &nats.url, &reader).await;
    let id = format!("{prefix}-w");
    let started = ask(
        &operator,
        subjects.api("start"),
        json!({"workflow_type": "noop_chain", "workflow_id": id, "input": {"steps": 3}}),
    )
    .await
    .expect("the operator's start is answered");
    assert_eq!(started["ok"], true, "{started}");
    assert_eq!(
        ended(&reader_client, &subjects, &id, Duration::from_secs(60)).await,
        "completed"
    );

    // A hosted cluster's whole life: the operator creates and scales it, the admin
    // destroys it — an operator may not.
    let pre = prerequisites(&stack.moto, &unique("permhc").to_lowercase()).await;
    let cluster = cluster_name("perm");
    let create = format!("{prefix}-create");
    let reply = ask(
        &operator,
        subjects.api("start"),
        json!({"workflow_type": "create_hosted_cluster", "workflow_id": create,
               "input": create_input(&cluster, &pre, 1)}),
    )
    .await
    .expect("the create is answered");
    assert_eq!(reply["ok"], true, "{reply}");
    let status = ended(&reader_client, &subjects, &create, Duration::from_secs(300)).await;
    assert_eq!(status, "completed", "the create");
    let scale = format!("{prefix}-scale");
    let reply = ask(
        &operator,
        subjects.api("start"),
        json!({"workflow_type": "scale_node_pool", "workflow_id": scale,
               "input": {"cluster": cluster, "node_pool": format!("{cluster}-us-east-1a"), "replicas": 2}}),
    )
    .await
    .expect("the scale is answered");
    assert_eq!(reply["ok"], true, "{reply}");
    let status = ended(&reader_client, &subjects, &scale, Duration::from_secs(120)).await;
    assert_eq!(status, "completed", "the scale");
    let destroy_id = format!("{prefix}-destroy");
    let destroy_body = json!({"workflow_type": "destroy_hosted_cluster",
                              "workflow_id": destroy_id, "input": {"cluster": cluster}});
    let destroy = subjects.api("destroy");
    assert!(ask(&operator, destroy.clone(), destroy_body.clone())
        .await
        .is_none());
    violated(&operator_errors, &destroy).await;
    let (admin, _) = client_as(&users, &nats.url, &name("default-admin")).await;
    let reply = ask(&admin, destroy, destroy_body)
        .await
        .expect("the admin's destroy is answered");
    assert_eq!(reply["ok"], true, "{reply}");
    let status = ended(
        &reader_client,
        &subjects,
        &destroy_id,
        Duration::from_secs(300),
    )
    .await;
    assert_eq!(status, "completed", "the destroy");
    let clusters = ask(
        &reader_client,
        subjects.api("clusters"),
        json!({"name": cluster, "include_destroyed": true}),
    )
    .await
    .unwrap();
    assert_eq!(clusters["clusters"][0]["state"], "destroyed", "{clusters}");

    // A reader may not start.
    let start = subjects.api("start");
    assert!(ask(&reader_client, start.clone(), json!({}))
        .await
        .is_none());
    violated(&reader_errors, &start).await;

    // Tenant acme's reader may not reach the default tenant's API, and through its own
    // finds nothing of the default tenant.
    let (acme_reader, acme_errors) = client_as(&users, &nats.url, &name("acme-reader")).await;
    let describe = subjects.api("describe");
    assert!(
        ask(&acme_reader, describe.clone(), json!({"workflow_id": id}))
            .await
            .is_none()
    );
    violated(&acme_errors, &describe).await;
    let own = ask(
        &acme_reader,
        subjects.tenant_api(&acme, "describe"),
        json!({"workflow_id": id}),
    )
    .await
    .expect("acme's describe is answered");
    assert_eq!(own["error"]["code"], "not_found", "{own}");
    // Nor may it destroy, even its own tenant's clusters: that is the admin's.
    let destroy = subjects.tenant_api(&acme, "destroy");
    assert!(ask(&acme_reader, destroy.clone(), json!({}))
        .await
        .is_none());
    violated(&acme_errors, &destroy).await;

    // A client may not publish a task, nor listen on the API subject.
    let task = subjects.workflow_tasks();
    operator.publish(task.clone(), "{}".into()).await.unwrap();
    operator.flush().await.unwrap();
    violated(&operator_errors, &task).await;
    let _listening = operator.subscribe(subjects.api_all()).await.unwrap();
    operator.flush().await.unwrap();
    violated(&operator_errors, &subjects.api_all()).await;

    // Nobody may delete the witness stream: no process, no admin.
    let audit = subjects.stream(StreamRole::Audit);
    for user in [
        "migrate",
        "api",
        "workflow",
        "activity",
        "relay",
        "timer",
        "server",
        "default-admin",
    ] {
        let (client, errors) = client_as(&users, &nats.url, &name(user)).await;
        let js = async_nats::jetstream::new(client);
        let deleted = tokio::time::timeout(Duration::from_secs(3), js.delete_stream(&audit)).await;
        assert!(
            !matches!(deleted, Ok(Ok(_))),
            "{user} deleted the witness stream"
        );
        violated(&errors, &format!("$JS.API.STREAM.DELETE.{audit}")).await;
    }
    let (migrate, _) = client_as(&users, &nats.url, &name("migrate")).await;
    let js = async_nats::jetstream::new(migrate);
    let mut witness = js
        .get_stream(&audit)
        .await
        .expect("the witness stream stays");
    let config = witness.info().await.unwrap().config.clone();
    // Nobody may change the witness stream, not even migrate (tighter limits would age
    // its checkpoints out); only migrate makes streams.
    for user in [
        "migrate", "api", "workflow", "activity", "relay", "timer", "server",
    ] {
        let (client, errors) = client_as(&users, &nats.url, &name(user)).await;
        let js = async_nats::jetstream::new(client);
        let loosened = async_nats::jetstream::stream::Config {
            deny_delete: false,
            deny_purge: false,
            ..config.clone()
        };
        let updated =
            tokio::time::timeout(Duration::from_secs(3), js.update_stream(&loosened)).await;
        assert!(
            !matches!(updated, Ok(Ok(_))),
            "{user} changed the witness stream"
        );
        violated(&errors, &format!("$JS.API.STREAM.UPDATE.{audit}")).await;
        if user == "migrate" {
            continue;
        }
        let created = tokio::time::timeout(
            Duration::from_secs(3),
            js.create_stream(async_nats::jetstream::stream::Config {
                name: format!("{audit}_COPY"),
                subjects: vec![format!("{}.copy", nats_prefix_of(&audit))],
                ..Default::default()
            }),
        )
        .await;
        assert!(!matches!(created, Ok(Ok(_))), "{user} created a stream");
        violated(&errors, &format!("$JS.API.STREAM.CREATE.{audit}_COPY")).await;
    }
    drop(processes);
}

/// A subject prefix of the stream's deployment (`<PREFIX>_AUDIT` → `<prefix>`).
fn nats_prefix_of(stream: &str) -> String {
    stream
        .rsplit_once('_')
        .map_or(stream, |(prefix, _)| prefix)
        .to_lowercase()
}
