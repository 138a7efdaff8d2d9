//! `hcpflow workflow list | describe | history | watch | cancel | signal`: any workflow,
//! through the public NATS API.

use anyhow::Context;
use serde_json::{json, Value};

use crate::cli::cluster::{OutputArgs, OutputFormat};
use crate::cli::follow::{completed, follow};
use crate::cli::progress::step_label;
use hcpflow_protocol::client::ApiClient;

#[derive(Debug, clap::Subcommand)]
pub enum WorkflowCommand {
    /// Workflows, newest first.
    List {
        /// pending, running, completed, compensating, compensated, cancelled, failed, blocked.
        #[arg(long)]
        status: Option<String>,
        /// A workflow type (create_hosted_cluster, scale_node_pool, ...).
        #[arg(long = "type")]
        workflow_type: Option<String>,
        /// The workflows of one cluster (their concurrency key).
        #[arg(long)]
        cluster: Option<String>,
        /// At most this many.
        #[arg(long, default_value_t = 50)]
        limit: u32,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// One workflow: type, status, times, output or error.
    Describe {
        workflow_id: String,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Every event of a workflow's history, with its hash.
    History {
        workflow_id: String,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Follow a workflow live until it ends (exit status 0 only if it completed).
    Watch { workflow_id: String },
    /// Ask a workflow to stop: its compensations run, and it ends `cancelled`.
    Cancel {
        workflow_id: String,
        #[arg(long)]
        reason: Option<String>,
    },
    /// Send a signal with a JSON payload.
    Signal {
        workflow_id: String,
        name: String,
        /// The payload, as JSON.
        payload: String,
    },
}

impl WorkflowCommand {
    pub async fn run(self, api: &ApiClient) -> anyhow::Result<()> {
        match self {
            WorkflowCommand::List {
                status,
                workflow_type,
                cluster,
                limit,
                output,
            } => {
                let filter = json!({"status": status, "workflow_type": workflow_type,
                                    "concurrency_key": cluster, "limit": limit.clamp(1, 1000)});
                let reply = api.call("list", filter).await?;
                let workflows = reply["workflows"].as_array().cloned().unwrap_or_default();
                if output.output == OutputFormat::Json {
                    println!("{}", serde_json::to_string_pretty(&workflows)?);
                    return Ok(());
                }
                println!(
                    "{:<48} {:<24} {:<13} {:<16} UPDATED",
                    "WORKFLOW ID", "TYPE", "STATUS", "KEY"
                );
                for w in &workflows {
                    println!(
                        "{:<48} {:<24} {:<13} {:<16} {}",
                        w["workflow_id"].as_str().unwrap_or("?"),
                        w["workflow_type"].as_str().unwrap_or("?"),
                        w["status"].as_str().unwrap_or("?"),
                        w["concurrency_key"].as_str().unwrap_or("-"),
                        w["updated_at"].as_str().unwrap_or("?")
                    );
                }
                if reply["cursor"].is_string() {
                    println!("(more: raise --limit, or narrow with --status/--type/--cluster)");
                }
                Ok(())
            }
            WorkflowCommand::Describe {
                workflow_id,
                output,
            } => {
                let workflow = api.describe(&workflow_id).await?;
                if output.output == OutputFormat::Json {
                    println!("{}", serde_json::to_string_pretty(&workflow)?);
                    return Ok(());
                }
                for key in [
                    "workflow_id",
                    "workflow_type",
                    "status",
                    "concurrency_key",
                    "created_at",
                    "updated_at",
                ] {
                    println!("{key:<16} {}", plain(&workflow[key]));
                }
                for key in ["output", "error"] {
                    if !workflow[key].is_null() {
                        println!("{key}:");
                        let pretty = serde_json::to_string_pretty(&workflow[key])?;
                        for line in pretty.lines() {
                            println!("  {line}");
                        }
                    }
                }
                Ok(())
            }
            WorkflowCommand::History {
                workflow_id,
                output,
            } => {
                let events = api.history_from(&workflow_id, 1).await?;
                if output.output == OutputFormat::Json {
                    for event in &events {
                        println!("{}", serde_json::to_string(event)?);
                    }
                    return Ok(());
                }
                for event in &events {
                    println!("{}", history_line(event));
                }
                Ok(())
            }
            WorkflowCommand::Watch { workflow_id } => {
                println!("{workflow_id}");
                let resume = format!("hcpflow workflow watch {workflow_id}");
                match follow(api, &workflow_id, true)
                    .await?
                    .ended(&workflow_id, &resume, false)?
                {
                    Some(progress) => completed(&progress, &workflow_id),
                    None => Ok(()),
                }
            }
            WorkflowCommand::Cancel {
                workflow_id,
                reason,
            } => {
                api.call(
                    "cancel",
                    json!({"workflow_id": workflow_id, "reason": reason}),
                )
                .await?;
                println!("cancel requested for {workflow_id}; its compensations run next (hcpflow workflow watch {workflow_id})");
                Ok(())
            }
            WorkflowCommand::Signal {
                workflow_id,
                name,
                payload,
            } => {
                let payload: Value = serde_json::from_str(&payload)
                    .with_context(|| format!("the payload is not JSON: {payload}"))?;
                api.call(
                    "signal",
                    json!({"workflow_id": workflow_id, "signal": name, "payload": payload}),
                )
                .await?;
                println!("signal {name} recorded for {workflow_id}");
                Ok(())
            }
        }
    }
}

fn plain(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Null => "-".to_owned(),
        other => other.to_string(),
    }
}

/// `  12  2026-11-23T07:24:41.123Z  ActivityScheduled  aws.create_vpc  3fa2b1c4…`
pub fn history_line(entry: &Value) -> String {
    let data = &entry["data"];
    let kind = entry["type"].as_str().unwrap_or("?");
    let detail = match kind {
        "WorkflowStarted" => plain(&data["workflow_type"]),
        "ActivityScheduled" => {
            let label = step_label(
                data["activity_type"].as_str().unwrap_or("?"),
                &data["input"],
            );
            match data["compensation_of"].as_u64() {
                Some(seq) => format!("{label} (undoes seq {seq})"),
                None => label,
            }
        }
        "CompensationRegistered" => step_label(
            data["activity_type"].as_str().unwrap_or("?"),
            &data["input"],
        ),
        "ActivityCompleted" => format!("seq {} attempt {}", data["scheduled_seq"], data["attempt"]),
        "ActivityFailed" => format!(
            "seq {} attempt {}: {}: {}{}",
            data["scheduled_seq"],
            data["attempt"],
            plain(&data["failure"]["kind"]),
            plain(&data["failure"]["message"]),
            if data["retry_at"].is_null() {
                ""
            } else {
                " (retried)"
            }
        ),
        "ResourceCreated" | "ResourceDeleted" => format!(
            "{} {} (seq {} attempt {})",
            plain(&data["resource"]["kind"]),
            plain(&data["resource"]["id"]),
            data["activity_seq"],
            data["attempt"]
        ),
        "ResourceObserved" => format!(
            "{} {} owned by {} (seq {} attempt {})",
            plain(&data["resource"]["kind"]),
            plain(&data["resource"]["id"]),
            plain(&data["owner"]),
            data["activity_seq"],
            data["attempt"]
        ),
        "TimerStarted" => format!("{} ms", data["duration_ms"]),
        "SignalReceived" => plain(&data["name"]),
        _ => String::new(),
    };
    let hash = entry["hash"].as_str().unwrap_or("");
    format!(
        "{:>5}  {}  {:<24} {detail}  [{}…]",
        entry["seq"],
        plain(&entry["recorded_at"]),
        kind,
        &hash[..hash.len().min(12)]
    )
}
