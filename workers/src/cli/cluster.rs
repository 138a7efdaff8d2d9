//! `hcpflow cluster create | scale | destroy | status | list`: the HyperShift workflows
//! through the public NATS API, with live progress from the events stream.

use std::collections::BTreeMap;

use anyhow::bail;
use rand::Rng;
use serde_json::{json, Value};

use crate::cli::cluster_spec::CreateFlags;
use crate::cli::follow::{completed, follow, Followed};
use crate::cli::progress::{seconds, Outcome, Progress};
use hcpflow_engine::{WorkflowId, WorkflowStatus};
use hcpflow_protocol::{
    ApiClient, ApiRequest, ClusterView, ClustersRequest, DestroyRequest, ListRequest, StartRequest,
    WorkflowView,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    Text,
    Json,
}

#[derive(Debug, Clone, clap::Args)]
pub struct OutputArgs {
    /// `json` prints one machine-readable object instead of progress lines.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
}

#[derive(Debug, Clone, clap::Args)]
pub struct WaitArgs {
    /// Submit and return at once with the workflow id.
    #[arg(long)]
    pub no_wait: bool,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, clap::Subcommand)]
pub enum ClusterCommand {
    /// Create a hosted cluster: `-f cluster.yaml` and/or flags.
    Create {
        #[command(flatten)]
        spec: Box<CreateFlags>,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Scale a NodePool up or down (reverted if the new count is not reached).
    Scale {
        name: String,
        #[arg(long)]
        node_pool: String,
        #[arg(long)]
        replicas: i32,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Destroy a hosted cluster: everything its create made, then a sweep by infra id.
    Destroy {
        name: String,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// A cluster's state, what its create made, and its workflows.
    Status {
        name: String,
        /// Follow the cluster's running workflow, if any.
        #[arg(long)]
        follow: bool,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// The clusters in the registry.
    List {
        /// Include destroyed clusters.
        #[arg(long)]
        all: bool,
        #[command(flatten)]
        output: OutputArgs,
    },
}

impl ClusterCommand {
    pub async fn run(self, api: &ApiClient) -> anyhow::Result<()> {
        match self {
            ClusterCommand::Create { spec, wait } => {
                let input = spec.input()?;
                let name = input["name"].as_str().unwrap_or("cluster").to_owned();
                submit(api, "create_hosted_cluster", "create", &name, input, &wait).await
            }
            ClusterCommand::Scale {
                name,
                node_pool,
                replicas,
                wait,
            } => {
                let input = json!({"cluster": name, "node_pool": node_pool, "replicas": replicas});
                submit(api, "scale_node_pool", "scale", &name, input, &wait).await
            }
            ClusterCommand::Destroy { name, wait } => {
                let input = json!({"cluster": name});
                submit(
                    api,
                    "destroy_hosted_cluster",
                    "destroy",
                    &name,
                    input,
                    &wait,
                )
                .await
            }
            ClusterCommand::Status {
                name,
                follow,
                output,
            } => status(api, &name, follow, output.output).await,
            ClusterCommand::List { all, output } => list(api, all, output.output).await,
        }
    }
}

/// `<verb>-<name>-<UTC time>-<4 random>`: unique when a name is reused, and readable.
pub fn new_workflow_id(verb: &str, name: &str) -> String {
    let mut rng = rand::thread_rng();
    let suffix: String = (0..4)
        // No 'c': a suffix like `c123` would give the id a child's form, which is refused.
        .map(|_| char::from(b"abdefghijklmnopqrstuvwxyz0123456789"[rng.gen_range(0..35)]))
        .collect();
    let name: String = name
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .take(80)
        .collect();
    format!(
        "{verb}-{name}-{}-{suffix}",
        chrono::Utc::now().format("%Y%m%d%H%M%S")
    )
}

async fn submit(
    api: &ApiClient,
    workflow_type: &str,
    verb: &str,
    name: &str,
    input: Value,
    wait: &WaitArgs,
) -> anyhow::Result<()> {
    let json_output = wait.output.output == OutputFormat::Json;
    let workflow_id = WorkflowId::new(new_workflow_id(verb, name))?;
    let start = StartRequest {
        workflow_type: workflow_type.to_owned(),
        workflow_id: Some(workflow_id.clone()),
        input,
        parent: None,
    };
    // A destroy has a verb of its own (NATS permissions give it to admins alone).
    let reply = if verb == DestroyRequest::VERB {
        api.request(&DestroyRequest(start)).await?
    } else {
        api.request(&start).await?
    };
    if wait.no_wait {
        if json_output {
            println!("{}", serde_json::to_string(&reply)?);
        } else {
            println!("submitted {workflow_type} {workflow_id}");
            println!("follow it with: hcpflow cluster status {name} --follow");
        }
        return Ok(());
    }
    if !json_output {
        println!("{workflow_type} {workflow_id}");
    }
    let followed = follow(api, &workflow_id, !json_output).await?;
    finish(api, &workflow_id, name, followed, json_output).await
}

/// Prints how the workflow ended; an error (a non-zero exit) unless it completed.
async fn finish(
    api: &ApiClient,
    workflow_id: &WorkflowId,
    name: &str,
    followed: Followed,
    json_output: bool,
) -> anyhow::Result<()> {
    let resume = format!("hcpflow cluster status {name} --follow");
    let Some(progress) = followed.ended(workflow_id.as_str(), &resume, json_output)? else {
        return Ok(());
    };
    if json_output {
        println!(
            "{}",
            serde_json::to_string_pretty(&api.describe(workflow_id).await?)?
        );
    } else {
        print_summary(&progress);
    }
    completed(&progress, workflow_id.as_str())
}

fn print_summary(progress: &Progress) {
    let took = progress.elapsed().map(seconds).unwrap_or_default();
    println!();
    println!(
        "{} in {took}: {} events, {} resources created, {} deleted, {} observed (the operators'), {} retries, {} compensations",
        progress
            .outcome
            .as_ref()
            .map(Outcome::status)
            .unwrap_or("running"),
        progress.events,
        progress.created,
        progress.deleted,
        progress.observed,
        progress.retries,
        progress.compensations
    );
    if let Some(Outcome::Completed { output }) = &progress.outcome {
        match progress.workflow_type.as_deref() {
            Some("create_hosted_cluster") => print_create_output(output),
            Some("scale_node_pool") => println!(
                "  node pool {}: {} → {} replicas",
                output["node_pool"].as_str().unwrap_or("?"),
                output["previous_replicas"],
                output["replicas"]
            ),
            Some("destroy_hosted_cluster") => println!(
                "  {} undone; nothing of {} left",
                output["undone"]
                    .as_array()
                    .map(Vec::len)
                    .unwrap_or_default(),
                output["infra_id"].as_str().unwrap_or("the cluster")
            ),
            _ => println!("  output: {output}"),
        }
    }
}

fn print_create_output(output: &Value) {
    let text = |key: &str| output[key].as_str().unwrap_or("-").to_owned();
    let count = |key: &str| output[key].as_array().map(Vec::len).unwrap_or_default();
    println!("  infra id      {}", text("infra_id"));
    println!(
        "  network       {} ({} private + {} public subnets, {} NAT gateways)",
        text("vpc_id"),
        count("private_subnet_ids"),
        count("public_subnet_ids"),
        count("nat_gateway_ids")
    );
    println!(
        "  dns zones     public {}, private {}, local {}",
        text("public_zone_id"),
        text("private_zone_id"),
        text("local_zone_id")
    );
    println!("  oidc issuer   {}", text("issuer_url"));
    println!(
        "  iam           {} operator roles, instance profile {}",
        output["role_arns"]
            .as_object()
            .map(|r| r.len())
            .unwrap_or_default(),
        text("worker_instance_profile")
    );
    if let Some(link) = output["privatelink"].as_object() {
        println!(
            "  privatelink   {} ({} zones) → {}",
            link.get("vpc_endpoint_id")
                .and_then(Value::as_str)
                .unwrap_or("-"),
            link.get("network_interface_ids")
                .and_then(Value::as_array)
                .map(Vec::len)
                .unwrap_or_default(),
            link.get("endpoint_service_name")
                .and_then(Value::as_str)
                .unwrap_or("-")
        );
    }
    if let Some(link) = output["observed_privatelink"].as_object() {
        let zones = link
            .get("zones")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let mut endpoints: Vec<&str> = zones
            .iter()
            .filter_map(|zone| zone.get(1).and_then(Value::as_array))
            .flatten()
            .filter_map(|endpoint| endpoint["vpc_endpoint_id"].as_str())
            .collect();
        endpoints.sort_unstable();
        endpoints.dedup();
        let records: Vec<&str> = link
            .get("records")
            .and_then(Value::as_array)
            .map(|records| records.iter().filter_map(|r| r[0].as_str()).collect())
            .unwrap_or_default();
        println!(
            "  privatelink   by the HyperShift operators: {} in {} zones; {}",
            endpoints.join(", "),
            zones.len(),
            records.join(", ")
        );
    }
    println!(
        "  kubeconfig    secret {}/{}",
        text("namespace"),
        text("kubeconfig_secret")
    );
    if let Some(pools) = output["node_pools"].as_object() {
        let pools: Vec<String> = pools.iter().map(|(n, r)| format!("{n}={r}")).collect();
        println!("  node pools    {}", pools.join(" "));
    }
}

/// The cluster's registry row (the live one, else the newest destroyed one).
async fn find_cluster(api: &ApiClient, name: &str) -> anyhow::Result<ClusterView> {
    let reply = api
        .request(&ClustersRequest {
            name: Some(name.to_owned()),
            include_destroyed: true,
            limit: Some(1),
        })
        .await?;
    match reply.clusters.into_iter().next() {
        Some(cluster) => Ok(cluster),
        None => bail!("no cluster named {name} (hcpflow cluster list shows them)"),
    }
}

/// The cluster's registry row and its workflows — its create and everything after it
/// (not those of an earlier cluster of the name) — newest first.
pub async fn cluster_workflows(
    api: &ApiClient,
    name: &str,
) -> anyhow::Result<(ClusterView, Vec<WorkflowView>)> {
    let cluster = find_cluster(api, name).await?;
    let workflows = api
        .list_all(ListRequest {
            concurrency_key: Some(name.to_owned()),
            ..ListRequest::default()
        })
        .await?;
    // The times are RFC 3339 in UTC with microseconds: their text orders as they do.
    let since = workflows
        .iter()
        .find(|w| w.workflow_id == cluster.create_workflow_id)
        .map_or(&cluster.created_at, |w| &w.created_at)
        .clone();
    let own = workflows
        .into_iter()
        .filter(|w| w.created_at >= since)
        .collect();
    Ok((cluster, own))
}

async fn status(
    api: &ApiClient,
    name: &str,
    follow_running: bool,
    format: OutputFormat,
) -> anyhow::Result<()> {
    let (cluster, own) = cluster_workflows(api, name).await?;
    let create = own
        .iter()
        .find(|w| w.workflow_id == cluster.create_workflow_id);
    let create_output = create.and_then(|c| c.output.as_ref());
    let node_pools = current_node_pools(create_output, &own);
    if format == OutputFormat::Json {
        let view = json!({"cluster": cluster, "node_pools": node_pools,
                          "create_output": create_output,
                          "workflows": own});
        println!("{}", serde_json::to_string_pretty(&view)?);
    } else {
        println!("cluster {name}");
        println!("  state         {}", cluster.state);
        println!("  infra id      {}", cluster.infra_id);
        println!("  namespace     {}", cluster.namespace);
        println!(
            "  created       {} by {}",
            cluster.created_at, cluster.create_workflow_id
        );
        let destroyed = cluster.state == "destroyed";
        if let Some(output) = create_output.filter(|_| !destroyed) {
            print_create_output(output);
        }
        if !node_pools.is_empty() && !destroyed {
            let pools: Vec<String> = node_pools.iter().map(|(n, r)| format!("{n}={r}")).collect();
            println!("  replicas now  {}", pools.join(" "));
        }
        println!("workflows, newest first:");
        for workflow in &own {
            println!(
                "  {:<48} {:<24} {:<12} {}",
                workflow.workflow_id.as_str(),
                workflow.workflow_type,
                workflow.status.as_str(),
                workflow.updated_at
            );
        }
    }
    let running = own.iter().rev().find(|w| {
        matches!(
            w.status,
            WorkflowStatus::Pending | WorkflowStatus::Running | WorkflowStatus::Compensating
        )
    });
    if let (true, Some(running)) = (follow_running, running) {
        let id = running.workflow_id.clone();
        if format == OutputFormat::Text {
            println!("\nfollowing {id}");
        }
        let followed = follow(api, &id, format == OutputFormat::Text).await?;
        return finish(api, &id, name, followed, format == OutputFormat::Json).await;
    }
    Ok(())
}

/// NodePool → replicas: the create's, then each completed scale, oldest first.
fn current_node_pools(
    create_output: Option<&Value>,
    workflows: &[WorkflowView],
) -> BTreeMap<String, i64> {
    let mut pools: BTreeMap<String, i64> = create_output
        .and_then(|output| output["node_pools"].as_object())
        .map(|p| {
            p.iter()
                .map(|(n, r)| (n.clone(), r.as_i64().unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default();
    for scale in workflows
        .iter()
        .rev()
        .filter(|w| w.workflow_type == "scale_node_pool" && w.status == WorkflowStatus::Completed)
    {
        let Some(output) = &scale.output else {
            continue;
        };
        if let (Some(pool), Some(replicas)) =
            (output["node_pool"].as_str(), output["replicas"].as_i64())
        {
            pools.insert(pool.to_owned(), replicas);
        }
    }
    pools
}

async fn list(api: &ApiClient, all: bool, format: OutputFormat) -> anyhow::Result<()> {
    let clusters = api
        .request(&ClustersRequest {
            name: None,
            include_destroyed: all,
            limit: Some(1000),
        })
        .await?
        .clusters;
    if format == OutputFormat::Json {
        println!("{}", serde_json::to_string_pretty(&clusters)?);
        return Ok(());
    }
    if clusters.is_empty() {
        println!(
            "no clusters{}",
            if all {
                ""
            } else {
                " (--all shows destroyed ones)"
            }
        );
        return Ok(());
    }
    println!(
        "{:<24} {:<12} {:<28} {:<16} CREATED",
        "NAME", "STATE", "INFRA ID", "NAMESPACE"
    );
    for cluster in clusters {
        println!(
            "{:<24} {:<12} {:<28} {:<16} {}",
            cluster.name, cluster.state, cluster.infra_id, cluster.namespace, cluster.created_at
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workflow_ids_are_valid_and_differ_for_one_name() {
        let a = new_workflow_id("create", "demo");
        let b = new_workflow_id("create", "demo");
        assert_ne!(a, b);
        assert!(a.starts_with("create-demo-"));
        assert!(hcpflow_engine::WorkflowId::new(a).is_ok());
    }

    fn scale(status: WorkflowStatus, output: Option<Value>) -> WorkflowView {
        WorkflowView {
            workflow_id: WorkflowId::new("scale-1").unwrap(),
            workflow_type: "scale_node_pool".into(),
            status,
            created_at: String::new(),
            updated_at: String::new(),
            concurrency_key: None,
            output,
            error: None,
        }
    }

    #[test]
    fn replicas_follow_completed_scales_in_order() {
        let create = json!({"node_pools": {"p1": 2, "p2": 2}});
        let newer = scale(
            WorkflowStatus::Completed,
            Some(json!({"node_pool": "p1", "replicas": 1})),
        );
        let older = scale(
            WorkflowStatus::Completed,
            Some(json!({"node_pool": "p1", "replicas": 4})),
        );
        let failed = scale(WorkflowStatus::Compensated, None);
        let pools = current_node_pools(Some(&create), &[newer, failed, older]);
        assert_eq!(pools["p1"], 1);
        assert_eq!(pools["p2"], 2);
    }
}
