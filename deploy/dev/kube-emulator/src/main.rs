//! `hcpflow-kube-emulator`: the Kubernetes API emulator of the local stack.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use hcpflow_kube_emulator::operator::Timing;
use hcpflow_kube_emulator::server::{start, Options};

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
    let handle = start(Options {
        listen: args.listen,
        state_file: args.state_file,
        timing: Timing {
            step: Duration::from_millis(args.step_ms),
            node: Duration::from_millis(args.node_ms),
            deletion: Duration::from_millis(args.deletion_ms),
        },
        event_log: hcpflow_kube_emulator::store::EVENT_LOG,
    })
    .await?;
    tracing::info!(url = %handle.url(), "kube emulator serving");
    tokio::signal::ctrl_c().await?;
    handle.stop();
    // Let the state file's last save finish.
    tokio::time::sleep(Duration::from_millis(300)).await;
    Ok(())
}
