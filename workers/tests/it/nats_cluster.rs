//! NATS node loss: a three-node NATS cluster with every stream at three replicas
//! (`--stream-replicas 3`), an engine process (api, workflow, relay, timer) and an
//! activity process talking to all three nodes. Noop chains are started in waves while
//! the node leading the tasks stream is killed with SIGKILL and started again, and then,
//! once the cluster is whole, the node leading it next is stopped (SIGTERM, as a rolling
//! restart does) and started again. Every workflow completes, each step recorded once.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use hcpflow_protocol::subjects::{StreamRole, Subjects};
use serde_json::json;
use tokio::process::{Child, Command};

use crate::scale_out::assert_each_step_recorded_once;
use crate::support::{env_value, free_port, say, shared, stack, unique, Scratch, Server};

const NODES: usize = 3;
const WAVE: usize = 15;
const STEPS: u64 = 8;

/// One nats-server of the cluster: its ports and store stay the same across restarts.
struct Node {
    name: String,
    client_port: u16,
    monitor_port: u16,
    config: PathBuf,
    child: Option<Child>,
}

struct NatsCluster {
    program: String,
    nodes: Vec<Node>,
}

impl NatsCluster {
    async fn start(nats_server: &str, dir: &Path) -> NatsCluster {
        let route_ports: Vec<u16> = (0..NODES).map(|_| free_port()).collect();
        let routes: Vec<String> = route_ports
            .iter()
            .map(|port| format!("\"nats-route://127.0.0.1:{port}\""))
            .collect();
        let mut nodes = Vec::new();
        for (index, route_port) in route_ports.iter().enumerate() {
            let name = format!("n{}", index + 1);
            let (client_port, monitor_port) = (free_port(), free_port());
            let store = dir.join(&name);
            let config = dir.join(format!("{name}.conf"));
            std::fs::write(
                &config,
                format!(
                    "server_name: {name}\n\
                     listen: 127.0.0.1:{client_port}\n\
                     http: 127.0.0.1:{monitor_port}\n\
                     jetstream {{ store_dir: \"{}\", max_file_store: 1G, max_memory_store: 64M }}\n\
                     cluster {{ name: hcpflow-test, listen: 127.0.0.1:{route_port}, routes: [{}] }}\n",
                    store.display(),
                    routes.join(", ")
                ),
            )
            .unwrap();
            nodes.push(Node {
                name,
                client_port,
                monitor_port,
                config,
                child: None,
            });
        }
        let mut cluster = NatsCluster {
            program: nats_server.to_owned(),
            nodes,
        };
        for index in 0..NODES {
            cluster.spawn(index);
        }
        for index in 0..NODES {
            cluster.wait_healthy(index).await;
        }
        cluster
    }

    /// Every node's client URL, comma-separated: what the processes are given.
    fn urls(&self) -> String {
        self.nodes
            .iter()
            .map(|node| format!("nats://127.0.0.1:{}", node.client_port))
            .collect::<Vec<_>>()
            .join(",")
    }

    fn index_of(&self, name: &str) -> usize {
        self.nodes
            .iter()
            .position(|node| node.name == name)
            .unwrap_or_else(|| panic!("no node {name}"))
    }

    fn spawn(&mut self, index: usize) {
        let node = &mut self.nodes[index];
        let child = Command::new(&self.program)
            .arg("-c")
            .arg(&node.config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start nats-server");
        node.child = Some(child);
    }

    /// Until the node's JetStream is healthy: it is in the cluster, there is a meta
    /// leader, and the streams and consumers it holds have caught up.
    async fn wait_healthy(&self, index: usize) {
        let node = &self.nodes[index];
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        while tokio::time::Instant::now() < deadline {
            if healthz_ok(node.monitor_port).await {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        panic!("NATS node {} did not become healthy", node.name);
    }

    async fn kill9(&mut self, index: usize) {
        if let Some(mut child) = self.nodes[index].child.take() {
            let _ = child.start_kill();
            let _ = child.wait().await;
        }
    }

    /// SIGTERM: the node leaves as in a rolling restart.
    async fn stop(&mut self, index: usize) {
        if let Some(mut child) = self.nodes[index].child.take() {
            if let Some(pid) = child.id() {
                let _ = Command::new("kill")
                    .arg("-TERM")
                    .arg(pid.to_string())
                    .status()
                    .await;
            }
            let stopped = tokio::time::timeout(Duration::from_secs(30), child.wait()).await;
            if stopped.is_err() {
                let _ = child.start_kill();
                let _ = child.wait().await;
            }
        }
    }

    async fn restart(&mut self, index: usize) {
        self.spawn(index);
        self.wait_healthy(index).await;
    }
}

/// Whether the monitoring endpoint answers 200 to `/healthz`.
async fn healthz_ok(port: u16) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let attempt = async {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .ok()?;
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n")
            .await
            .ok()?;
        let mut response = String::new();
        stream.read_to_string(&mut response).await.ok()?;
        Some(response.starts_with("HTTP/1.1 200"))
    };
    tokio::time::timeout(Duration::from_secs(5), attempt)
        .await
        .ok()
        .flatten()
        .unwrap_or(false)
}

/// The server that leads `stream` now (after an election, once there is one).
async fn stream_leader(client: &async_nats::Client, stream: &str) -> String {
    let js = async_nats::jetstream::new(client.clone());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while tokio::time::Instant::now() < deadline {
        if let Ok(mut handle) = js.get_stream(stream).await {
            if let Ok(info) = handle.info().await {
                if let Some(leader) = info.cluster.as_ref().and_then(|c| c.leader.clone()) {
                    return leader;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("stream {stream} has no leader");
}

/// Starts a wave of chains, each long enough (STEPS × 250 ms) to straddle a node's loss.
async fn start_wave(api: &Server, ids: &mut Vec<String>, wave: usize) {
    for n in 0..WAVE {
        let id = format!("{}-w{wave}-{n}", api.prefix);
        let reply = start_patiently(api, &id).await;
        assert_eq!(reply["ok"], true, "start {id} in wave {wave}: {reply}");
        ids.push(id);
    }
}

/// A start sent again while it gets no reply, as the API's clients do (README: a start
/// is idempotent by its workflow id; `hcpflow` asks again for up to five minutes).
/// Right after a node's loss the request or its reply may be lost with the connection
/// it travelled on, and a client reconnects within seconds — more on a busy machine.
async fn start_patiently(api: &Server, id: &str) -> serde_json::Value {
    let body = json!({
        "workflow_type": "noop_chain",
        "workflow_id": id,
        "input": {"steps": STEPS, "sleep_ms": 250},
    });
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let sent = serde_json::to_vec(&body).unwrap();
        if let Some(reply) = api.try_api_raw("start", sent).await {
            return reply;
        }
        say(&format!(
            "nats cluster: no reply to the start of {id} yet; asking again"
        ));
        assert!(
            tokio::time::Instant::now() < deadline,
            "no reply to the start of {id} within a minute"
        );
        // A request refused at once (no server yet) is not sent again in a busy loop.
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workflows_survive_losing_a_nats_node_twice() {
    let Some(env) = stack("workflows_survive_losing_a_nats_node_twice") else {
        return;
    };
    let _shared = shared().await;
    let dir = Scratch(std::env::temp_dir().join(unique("nats-cluster")));
    std::fs::create_dir_all(&dir.0).unwrap();
    let mut cluster = NatsCluster::start(&env_value(&env, "HCPFLOW_DEV_NATS_SERVER"), &dir.0).await;
    let mut env = env;
    env.retain(|(key, _)| key != "HCPFLOW_NATS_URL");
    env.push(("HCPFLOW_NATS_URL".into(), cluster.urls()));
    let prefix = unique("natsha");
    let streams = ["--stream-replicas", "3", "--stream-max-bytes", "67108864"];
    let urls = cluster.urls();
    let connect = || async_nats::connect(urls.split(',').collect::<Vec<_>>());
    let engine = Server::start_worker_with_client(
        env.clone(),
        &prefix,
        "api,workflow,relay,timer",
        &streams,
        connect().await.unwrap(),
    )
    .await;
    let activity = Server::start_worker_with_client(
        env.clone(),
        &prefix,
        "activity",
        &streams,
        connect().await.unwrap(),
    )
    .await;
    let subjects = Subjects::new(&prefix).unwrap();
    let js = async_nats::jetstream::new(engine.client.clone());
    for role in StreamRole::ALL {
        let name = subjects.stream(role);
        let info = js
            .get_stream(&name)
            .await
            .unwrap()
            .info()
            .await
            .unwrap()
            .clone();
        assert_eq!(info.config.num_replicas, 3, "{name}");
        let replicas = info.cluster.as_ref().map_or(0, |c| c.replicas.len());
        assert_eq!(replicas, NODES - 1, "{name}: the leader's two followers");
    }
    let tasks = subjects.stream(StreamRole::Tasks);

    let mut ids = Vec::new();
    start_wave(&engine, &mut ids, 1).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let first = cluster.index_of(&stream_leader(&engine.client, &tasks).await);
    say(&format!(
        "nats cluster: kill -9 {} (leads {tasks})",
        cluster.nodes[first].name
    ));
    cluster.kill9(first).await;
    start_wave(&engine, &mut ids, 2).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    cluster.restart(first).await;
    for index in 0..NODES {
        cluster.wait_healthy(index).await;
    }

    start_wave(&engine, &mut ids, 3).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    // Another node than the first: the tasks stream's leader now, unless that is the
    // first again.
    let leader = cluster.index_of(&stream_leader(&engine.client, &tasks).await);
    let second = if leader == first {
        (first + 1) % NODES
    } else {
        leader
    };
    say(&format!(
        "nats cluster: stop {} (the tasks stream's leader is {})",
        cluster.nodes[second].name, cluster.nodes[leader].name
    ));
    cluster.stop(second).await;
    start_wave(&engine, &mut ids, 4).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    cluster.restart(second).await;

    for id in &ids {
        let status = engine.wait_terminal(id, Duration::from_secs(180)).await;
        assert_eq!(status, "completed", "{id}");
        assert_each_step_recorded_once(&engine, id, STEPS).await;
    }
    let mut engine = engine;
    let mut activity = activity;
    activity.stop().await;
    engine.stop().await;
}
