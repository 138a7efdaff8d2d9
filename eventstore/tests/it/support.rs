//! Finding the stack, connecting, and making ids no other test uses.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use hcpflow_engine::{Seq, WorkflowId, WorkflowStatus};
use hcpflow_eventstore::{AppendBatch, EventStore, NewEvent, NewWorkflow};
use serde_json::json;
use sqlx::postgres::PgPoolOptions;
use sqlx::PgPool;
use tokio::sync::OnceCell;

/// The database URLs `.dev/env` provides.
#[derive(Debug, Clone)]
pub(crate) struct Stack {
    pub(crate) app_url: String,
    pub(crate) admin_url: String,
    pub(crate) superuser_url: String,
}

/// Prints straight to the terminal: the test harness does not capture this.
pub(crate) fn say(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// The stack's URLs, or `None` (with a message) when the stack is not up. Under
/// `make test` (`HCPFLOW_REQUIRE_STACK=1`) a missing stack is a failure, not a skip.
pub(crate) fn stack(test: &str) -> Option<Stack> {
    let urls = (
        std::env::var("HCPFLOW_DATABASE_URL"),
        std::env::var("HCPFLOW_DATABASE_ADMIN_URL"),
        std::env::var("HCPFLOW_DATABASE_SUPERUSER_URL"),
    );
    match urls {
        (Ok(app_url), Ok(admin_url), Ok(superuser_url)) => Some(Stack {
            app_url,
            admin_url,
            superuser_url,
        }),
        _ if std::env::var_os("HCPFLOW_REQUIRE_STACK").is_some() => {
            panic!("{test}: HCPFLOW_DATABASE_URL, _ADMIN_URL and _SUPERUSER_URL must be set under make test")
        }
        _ => {
            say(&format!(
                "skipping {test}: it needs the dev stack's Postgres; run `make test`"
            ));
            None
        }
    }
}

static MIGRATED: OnceCell<()> = OnceCell::const_new();

/// Migrates once per test process, then connects as the application role.
pub(crate) async fn store(test: &str) -> Option<(Stack, EventStore)> {
    let stack = stack(test)?;
    MIGRATED
        .get_or_init(|| async {
            let role = hcpflow_eventstore::migrate::role_of_url(&stack.app_url).expect("app URL");
            hcpflow_eventstore::migrate::run_with_url(&stack.admin_url, Some(&role))
                .await
                .expect("migrations apply");
        })
        .await;
    let store = EventStore::connect(&stack.app_url, 16)
        .await
        .expect("connect as the application role");
    Some((stack, store))
}

pub(crate) async fn pool(url: &str) -> PgPool {
    PgPoolOptions::new()
        .max_connections(2)
        .connect(url)
        .await
        .expect("connect")
}

/// A workflow id unique across tests, processes and runs.
pub(crate) fn unique_id(prefix: &str) -> WorkflowId {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    WorkflowId::new(format!(
        "{prefix}-{}-{nanos}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ))
    .expect("valid id")
}

pub(crate) fn event(n: u64) -> NewEvent {
    NewEvent::new("TestEvent", json!({"n": n, "note": "hcpflow test"}))
}

pub(crate) fn new_workflow(workflow_type: &str) -> NewWorkflow {
    NewWorkflow {
        workflow_type: workflow_type.to_owned(),
        status: WorkflowStatus::Running,
        concurrency_key: None,
        parent_id: None,
        input_digest: None,
        events_subject: None,
        tenant: hcpflow_engine::TenantId::default_tenant(),
    }
}

/// Creates a workflow whose history holds `events` test events.
pub(crate) async fn workflow_with_events(
    store: &EventStore,
    prefix: &str,
    events: u64,
) -> WorkflowId {
    let id = unique_id(prefix);
    let batch = AppendBatch::new(id.clone(), Seq::FIRST, (1..=events).map(event).collect());
    store
        .create_workflow(&new_workflow("test"), batch)
        .await
        .expect("create");
    id
}
