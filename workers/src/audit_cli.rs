//! `hcpflow audit`: evidence about what workflows did, through the NATS API.
//!
//! Today: `verify` recomputes each history's hash chain in the database and summarises
//! the history (events, resources created and deleted, retries, compensations).

use anyhow::bail;
use serde_json::{json, Value};

use crate::api_client::ApiClient;
use crate::cluster_cli::{cluster_workflows, OutputArgs, OutputFormat};
use crate::progress::Progress;

#[derive(Debug, clap::Subcommand)]
pub enum AuditCommand {
    /// Recompute workflows' hash chains and summarise their histories; exits non-zero
    /// when a chain does not verify, naming the first bad seq.
    Verify {
        /// Workflow ids.
        workflow_ids: Vec<String>,
        /// Every workflow of this cluster (its create and what followed), oldest first.
        #[arg(long)]
        cluster: Option<String>,
        #[command(flatten)]
        output: OutputArgs,
    },
}

impl AuditCommand {
    pub async fn run(self, api: &ApiClient) -> anyhow::Result<()> {
        match self {
            AuditCommand::Verify {
                mut workflow_ids,
                cluster,
                output,
            } => {
                if let Some(cluster) = &cluster {
                    let (_, workflows) = cluster_workflows(api, cluster).await?;
                    workflow_ids.extend(
                        workflows
                            .iter()
                            .rev()
                            .filter_map(|w| w["workflow_id"].as_str().map(str::to_owned)),
                    );
                }
                if workflow_ids.is_empty() {
                    bail!("name workflow ids, or --cluster NAME");
                }
                verify(api, &workflow_ids, output.output).await
            }
        }
    }
}

async fn verify(api: &ApiClient, ids: &[String], format: OutputFormat) -> anyhow::Result<()> {
    let mut reports = Vec::new();
    let mut bad = Vec::new();
    for id in ids {
        let workflow = api.describe(id).await?;
        let chain = api.call("verify", json!({"workflow_id": id})).await?;
        let mut progress = Progress::new();
        for entry in api.history_from(id, 1).await? {
            progress.apply(&entry);
        }
        if chain["verified"] != json!(true) {
            bad.push(format!(
                "{id}: first bad seq {}: {}",
                chain["first_bad_seq"],
                chain["reason"].as_str().unwrap_or("")
            ));
        }
        reports.push(json!({
            "workflow_id": id,
            "workflow_type": workflow["workflow_type"],
            "status": workflow["status"],
            "chain": chain,
            "events": progress.events,
            "resources_created": progress.created,
            "resources_deleted": progress.deleted,
            "retries": progress.retries,
            "compensations": progress.compensations,
        }));
    }
    match format {
        OutputFormat::Json => println!("{}", serde_json::to_string_pretty(&reports)?),
        OutputFormat::Text => {
            for report in &reports {
                println!("{}", report_line(report));
            }
        }
    }
    if !bad.is_empty() {
        bail!("history does not verify: {}", bad.join("; "));
    }
    Ok(())
}

fn report_line(report: &Value) -> String {
    let chain = &report["chain"];
    let verdict = if chain["verified"] == json!(true) {
        let head = chain["head_hash"].as_str().unwrap_or("");
        format!("chain verified, head {}…", &head[..head.len().min(12)])
    } else {
        format!("CHAIN BROKEN at seq {}", chain["first_bad_seq"])
    };
    format!(
        "{} {} {}\n    {} events, {} resources created, {} deleted, {} retries, {} compensations; {verdict}",
        report["workflow_id"].as_str().unwrap_or("?"),
        report["workflow_type"].as_str().unwrap_or("?"),
        report["status"].as_str().unwrap_or("?"),
        report["events"],
        report["resources_created"],
        report["resources_deleted"],
        report["retries"],
        report["compensations"],
    )
}
