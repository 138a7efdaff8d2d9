//! An emulator per test, and a small HTTP client.

use std::time::Duration;

use hcpflow_kube_emulator::operator::Timing;
use hcpflow_kube_emulator::server::{start, start_with, Handle, Install, Options};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

pub(crate) async fn emulator() -> Handle {
    emulator_with(None, 1_000).await
}

pub(crate) async fn emulator_with(
    state_file: Option<std::path::PathBuf>,
    event_log: usize,
) -> Handle {
    start(options(state_file, event_log)).await.unwrap()
}

fn options(state_file: Option<std::path::PathBuf>, event_log: usize) -> Options {
    Options {
        listen: "127.0.0.1:0".parse().unwrap(),
        state_file,
        timing: Timing {
            step: Duration::from_millis(50),
            node: Duration::from_millis(100),
            deletion: Duration::from_millis(200),
        },
        event_log,
    }
}

/// An emulator whose operator is installed as `install` says.
pub(crate) async fn emulator_installed(install: Install) -> Handle {
    emulator_installed_with(install, None).await
}

/// An emulator installed as `install` says, keeping its objects in `state_file`.
pub(crate) async fn emulator_installed_with(
    install: Install,
    state_file: Option<std::path::PathBuf>,
) -> Handle {
    start_with(options(state_file, 1_000), install)
        .await
        .unwrap()
}

/// One request; `(status, body as JSON)`.
pub(crate) async fn call(
    handle: &Handle,
    method: &str,
    path: &str,
    content_type: &str,
    body: &str,
) -> (u16, Value) {
    let mut stream = TcpStream::connect(handle.addr).await.unwrap();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        handle.addr,
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.unwrap();
    let text = String::from_utf8(response).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let status: u16 = head.split(' ').nth(1).unwrap().parse().unwrap();
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_owned()
    };
    (
        status,
        serde_json::from_str(&body).unwrap_or(Value::String(body)),
    )
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if size == 0 {
            break;
        }
        out.push_str(&rest[..size]);
        body = &rest[size + 2..];
    }
    out
}

pub(crate) async fn get(handle: &Handle, path: &str) -> (u16, Value) {
    call(handle, "GET", path, "application/json", "").await
}

pub(crate) async fn post(handle: &Handle, path: &str, body: &Value) -> (u16, Value) {
    call(handle, "POST", path, "application/json", &body.to_string()).await
}

pub(crate) async fn put(handle: &Handle, path: &str, body: &Value) -> (u16, Value) {
    call(handle, "PUT", path, "application/json", &body.to_string()).await
}

pub(crate) async fn patch(handle: &Handle, path: &str, kind: &str, body: &str) -> (u16, Value) {
    call(handle, "PATCH", path, kind, body).await
}

pub(crate) async fn delete(handle: &Handle, path: &str) -> (u16, Value) {
    call(handle, "DELETE", path, "application/json", "").await
}

/// Polls `path` until `done` holds for the object, for at most 10 s.
pub(crate) async fn until(
    handle: &Handle,
    path: &str,
    done: impl Fn(u16, &Value) -> bool,
) -> Value {
    for _ in 0..200 {
        let (status, body) = get(handle, path).await;
        if done(status, &body) {
            return body;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!(
        "{path} never reached the expected state: {:?}",
        get(handle, path).await
    );
}

/// A watch: the event lines as they come.
pub(crate) struct Watch {
    lines: tokio::io::Lines<BufReader<TcpStream>>,
}

impl Watch {
    pub(crate) async fn open(handle: &Handle, path: &str) -> Self {
        let mut stream = TcpStream::connect(handle.addr).await.unwrap();
        let request = format!("GET {path} HTTP/1.1\r\nHost: {}\r\n\r\n", handle.addr);
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut lines = BufReader::new(stream).lines();
        // Skip the head.
        while let Some(line) = lines.next_line().await.unwrap() {
            if line.is_empty() {
                break;
            }
        }
        Self { lines }
    }

    /// The next event, or `None` when the stream ends (or after 5 s).
    pub(crate) async fn next(&mut self) -> Option<Value> {
        self.next_within(Duration::from_secs(5)).await
    }

    /// The next event, or `None` when the stream ends (or after `wait` without one).
    pub(crate) async fn next_within(&mut self, wait: Duration) -> Option<Value> {
        loop {
            let line = tokio::time::timeout(wait, self.lines.next_line())
                .await
                .ok()?
                .ok()??;
            // Chunk sizes sit on lines of their own.
            if let Ok(event) = serde_json::from_str::<Value>(&line) {
                if event.is_object() {
                    return Some(event);
                }
            }
            if line.trim() == "0" {
                return None;
            }
        }
    }
}

pub(crate) fn namespace(name: &str) -> Value {
    serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
}

/// The pull secret `hosted_cluster(name)` refers to, `<name>-pull-secret`: a
/// `kubernetes.io/dockerconfigjson` Secret whose `.dockerconfigjson` is a JSON document,
/// as the API server and the operator want it.
pub(crate) fn pull_secret(name: &str) -> Value {
    use base64::Engine;
    let document = base64::engine::general_purpose::STANDARD.encode(r#"{"auths":{}}"#);
    serde_json::json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": format!("{name}-pull-secret")},
        "type": "kubernetes.io/dockerconfigjson",
        "data": {".dockerconfigjson": document},
    })
}

/// Creates the pull secret of the HostedCluster `name` in `namespace`.
pub(crate) async fn post_pull_secret(handle: &Handle, namespace: &str, name: &str) {
    let (status, body) = post(
        handle,
        &format!("/api/v1/namespaces/{namespace}/secrets"),
        &pull_secret(name),
    )
    .await;
    assert_eq!(status, 201, "{body}");
}

/// A Public AWS HostedCluster the operator accepts (once its `pull_secret` exists): the services published as its
/// `validateAWSConfig` requires, no service-account signing key of its own.
pub(crate) fn hosted_cluster(name: &str) -> Value {
    let infra = format!("{name}-abcde");
    let role = |suffix: &str| format!("arn:aws:iam::123456789012:role/{infra}-{suffix}");
    let route = serde_json::json!({"type": "Route"});
    serde_json::json!({
        "apiVersion": "hypershift.openshift.io/v1beta1", "kind": "HostedCluster",
        "metadata": {"name": name},
        "spec": {
            "infraID": infra,
            "release": {"image": "quay.io/ocp-release:4.17.0"},
            "pullSecret": {"name": format!("{name}-pull-secret")},
            "networking": {"networkType": "OVNKubernetes",
                           "machineNetwork": [{"cidr": "10.0.0.0/16"}],
                           "clusterNetwork": [{"cidr": "10.132.0.0/14"}],
                           "serviceNetwork": [{"cidr": "172.31.0.0/16"}]},
            "dns": {"baseDomain": "example.com"},
            "platform": {"type": "AWS", "aws": {
                "region": "us-east-1", "endpointAccess": "Public",
                "rolesRef": {
                    "ingressARN": role("openshift-ingress"),
                    "imageRegistryARN": role("openshift-image-registry"),
                    "storageARN": role("aws-ebs-csi-driver-controller"),
                    "networkARN": role("cloud-network-config-controller"),
                    "kubeCloudControllerARN": role("cloud-controller"),
                    "nodePoolManagementARN": role("node-pool"),
                    "controlPlaneOperatorARN": role("control-plane-operator"),
                },
            }},
            "services": [
                {"service": "APIServer", "servicePublishingStrategy": {"type": "LoadBalancer"}},
                {"service": "OAuthServer", "servicePublishingStrategy": route},
                {"service": "Konnectivity", "servicePublishingStrategy": route},
                {"service": "Ignition", "servicePublishingStrategy": route},
            ],
        },
    })
}

pub(crate) fn node_pool(name: &str, cluster: &str, replicas: i64) -> Value {
    serde_json::json!({
        "apiVersion": "hypershift.openshift.io/v1beta1", "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {"clusterName": cluster, "replicas": replicas,
                 "release": {"image": "quay.io/ocp-release:4.17.0"},
                 "management": {"upgradeType": "Replace"},
                 "platform": {"type": "AWS", "aws": {"instanceType": "m5.large",
                              "subnet": {"id": "subnet-0abc"}}}},
    })
}

pub(crate) const HC: &str =
    "/apis/hypershift.openshift.io/v1beta1/namespaces/clusters/hostedclusters";
pub(crate) const NP: &str = "/apis/hypershift.openshift.io/v1beta1/namespaces/clusters/nodepools";
