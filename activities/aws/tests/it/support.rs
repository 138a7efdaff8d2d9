//! The stack's AWS endpoints, per-test clients, and the fault proxy's control API.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicU32, Ordering};

use hcpflow_aws::{AwsClients, AwsSettings, Scope};
use hcpflow_engine::{Ledger, WorkflowId};

pub(crate) struct Stack {
    /// Clients that go through the fault proxy, signed with this test's key.
    pub aws: AwsClients,
    /// Clients that talk to moto directly: the independent view.
    pub moto: AwsClients,
    pub key: String,
    /// The workflow the scopes' attempts run for.
    pub workflow_id: WorkflowId,
    faults: String,
}

/// A name no other test or run uses.
pub(crate) fn unique(prefix: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "{prefix}{}{}{}",
        std::process::id() % 10_000,
        nanos % 100_000,
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// The stack, or `None` (with a message) when it is not up.
pub(crate) async fn stack(test: &str) -> Option<Stack> {
    let vars = [
        "HCPFLOW_AWS_ENDPOINT",
        "HCPFLOW_DEV_MOTO_ENDPOINT",
        "HCPFLOW_DEV_AWS_FAULTS",
    ];
    let values: Option<Vec<String>> = vars.iter().map(|v| std::env::var(v).ok()).collect();
    let Some(values) = values else {
        if std::env::var_os("HCPFLOW_REQUIRE_STACK").is_some() {
            panic!("{test}: the dev stack's variables must be set under make test");
        }
        eprintln!("skipping {test}: it needs the dev stack's moto; run `make test`");
        return None;
    };
    let key = unique("AKIDTEST").to_uppercase();
    let region = std::env::var("AWS_REGION").unwrap_or_else(|_| "us-east-1".into());
    let settings = |endpoint: &str, key: &str| AwsSettings {
        region: region.clone(),
        endpoint: Some(endpoint.to_owned()),
        static_credentials: Some((key.to_owned(), "testing".to_owned())),
    };
    Some(Stack {
        aws: AwsClients::connect(&settings(&values[0], &key)).await,
        moto: AwsClients::connect(&settings(&values[1], "AKIDCHECKER")).await,
        faults: values[2].clone(),
        workflow_id: WorkflowId::new(format!("aws-activities-{key}"))
            .expect("the test key makes a valid workflow id"),
        key,
    })
}

impl Stack {
    /// A scope for one attempt of an activity with `idempotency_key`.
    pub(crate) fn scope<'a>(
        &'a self,
        idempotency_key: &'a str,
        cluster: &'a str,
        log: &'a Ledger,
    ) -> Scope<'a> {
        Scope {
            workflow_id: &self.workflow_id,
            idempotency_key,
            region: &self.aws.region,
            cluster: Some(cluster),
            log,
        }
    }

    /// Makes the proxy answer `action` with `fault` (`throttle`, `unavailable`, or
    /// `error` with `code` and `status`) `times` times.
    pub(crate) fn inject(&self, action: &str, fault: &str, times: u32, error: Option<(&str, u16)>) {
        let mut rule = serde_json::json!({
            "key": self.key, "action": action, "fault": fault, "times": times,
        });
        if let Some((code, status)) = error {
            rule["code"] = code.into();
            rule["status"] = status.into();
            rule["message"] = format!("{code} injected by the test").into();
        }
        self.control("POST", "/rules", &rule.to_string());
    }

    /// The actions this test sent through the proxy, in order.
    pub(crate) fn actions(&self) -> Vec<String> {
        let log: serde_json::Value =
            serde_json::from_str(&self.control("GET", &format!("/log?key={}", self.key), ""))
                .unwrap();
        log.as_array()
            .unwrap()
            .iter()
            .map(|entry| entry["action"].as_str().unwrap().to_owned())
            .collect()
    }

    /// One request to the control API; returns the body.
    fn control(&self, method: &str, path: &str, body: &str) -> String {
        let base = self.faults.trim_start_matches("http://");
        let (host, prefix) = base.split_once('/').unwrap();
        let mut stream = TcpStream::connect(host).unwrap();
        write!(
            stream,
            "{method} /{prefix}{path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        let (head, body) = response.split_once("\r\n\r\n").unwrap();
        assert!(
            head.starts_with("HTTP/1.1 200") || head.starts_with("HTTP/1.0 200"),
            "{head}"
        );
        body.to_owned()
    }
}
