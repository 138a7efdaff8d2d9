//! `hcpflow-kube-emulator`: the Kubernetes API emulator of the local stack.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use hcpflow_kube_emulator::operator::cloud::{Settings, GUEST_CLEANUP_TIMEOUT};
use hcpflow_kube_emulator::operator::Timing;
use hcpflow_kube_emulator::server::{start_with, Install, Options};

/// A Kubernetes API emulator with a simulated HyperShift operator (hcpflow's dev stack).
#[derive(Debug, Parser)]
struct Args {
    /// Address to serve on (keep it on 127.0.0.1).
    #[arg(long, default_value = "127.0.0.1:56443")]
    listen: SocketAddr,
    /// Keep the objects in this file across restarts.
    #[arg(long)]
    state_file: Option<PathBuf>,
    /// Milliseconds between two HostedCluster conditions.
    #[arg(long, env = "HCPFLOW_EMULATOR_STEP_MS", default_value_t = 300)]
    step_ms: u64,
    /// Milliseconds per NodePool node.
    #[arg(long, env = "HCPFLOW_EMULATOR_NODE_MS", default_value_t = 500)]
    node_ms: u64,
    /// Milliseconds from a delete to the finalizer's removal.
    #[arg(long, env = "HCPFLOW_EMULATOR_DELETION_MS", default_value_t = 1000)]
    deletion_ms: u64,
    /// The AWS endpoint (moto) the operators' cloud side works against: the operator is
    /// installed with the AWS private platform in --aws-region. Without it, the cloud
    /// side is off and the operator has no private platform.
    #[arg(long, env = "HCPFLOW_EMULATOR_AWS_ENDPOINT")]
    aws_endpoint: Option<String>,
    /// The AWS region of the private platform and of the cloud side.
    #[arg(long, env = "HCPFLOW_EMULATOR_AWS_REGION", default_value = "us-east-1")]
    aws_region: String,
    /// The management cluster's name (its subnets carry `kubernetes.io/cluster/<name>`).
    #[arg(
        long,
        env = "HCPFLOW_EMULATOR_MANAGEMENT_CLUSTER",
        default_value = "hcpflow-management"
    )]
    management_cluster: String,
    /// Milliseconds between two passes of the cloud side.
    #[arg(long, env = "HCPFLOW_EMULATOR_CLOUD_MS", default_value_t = 500)]
    cloud_ms: u64,
    /// Milliseconds the control plane waits for the guest's cloud resources to go, on
    /// the deletion of a HostedCluster annotated cleanup-cloud-resources, before giving
    /// up (the real `resourceDeletionTimeout` is 10 minutes).
    #[arg(
        long,
        env = "HCPFLOW_EMULATOR_GUEST_CLEANUP_TIMEOUT_MS",
        default_value_t = GUEST_CLEANUP_TIMEOUT.as_millis() as u64
    )]
    guest_cleanup_timeout_ms: u64,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("HCPFLOW_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let install = match &args.aws_endpoint {
        Some(endpoint) => Install::with_cloud(Settings {
            endpoint: endpoint.clone(),
            region: args.aws_region.clone(),
            management_cluster: args.management_cluster.clone(),
            period: Duration::from_millis(args.cloud_ms.max(50)),
            guest_cleanup_timeout: Duration::from_millis(args.guest_cleanup_timeout_ms),
        }),
        None => Install::default(),
    };
    let cloud = install.cloud.is_some();
    let handle = start_with(
        Options {
            listen: args.listen,
            state_file: args.state_file,
            timing: Timing {
                step: Duration::from_millis(args.step_ms),
                node: Duration::from_millis(args.node_ms),
                deletion: Duration::from_millis(args.deletion_ms),
            },
            event_log: hcpflow_kube_emulator::store::EVENT_LOG,
        },
        install,
    )
    .await?;
    tracing::info!(url = %handle.url(), cloud, "kube emulator serving");
    tokio::signal::ctrl_c().await?;
    handle.stop();
    // Let the state file's last save finish.
    tokio::time::sleep(Duration::from_millis(300)).await;
    Ok(())
}
