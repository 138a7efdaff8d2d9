//! `hcpflow workflow list | describe | history | watch | cancel | signal`: any workflow,
//! through the public NATS API.

use anyhow::Context;
use hcpflow_engine::event::{ResourceCreated, ResourceDeleted};
use hcpflow_engine::{Event, Seq, WorkflowId, WorkflowStatus};
use serde_json::Value;

use crate::cli::cluster::{OutputArgs, OutputFormat};
use crate::cli::follow::{completed, follow};
use crate::cli::progress::step_label;
use hcpflow_protocol::{ApiClient, CancelRequest, HistoryEntry, ListRequest, SignalRequest};

#[derive(Debug, clap::Subcommand)]
pub enum WorkflowCommand {
    /// Workflows, newest first.
    List {
        /// pending, running, completed, compensating, compensated, cancelled, failed, blocked.
        #[arg(long)]
        status: Option<WorkflowStatus>,
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
        workflow_id: WorkflowId,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Every event of a workflow's history, with its hash.
    History {
        workflow_id: WorkflowId,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Follow a workflow live until it ends (exit status 0 only if it completed).
    Watch { workflow_id: WorkflowId },
    /// Ask a workflow to stop: its compensations run, and it ends `cancelled`.
    Cancel {
        workflow_id: WorkflowId,
        #[arg(long)]
        reason: Option<String>,
    },
    /// Send a signal with a JSON payload.
    Signal {
        workflow_id: WorkflowId,
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
                let filter = ListRequest {
                    status,
                    workflow_type,
                    concurrency_key: cluster,
                    limit: Some(limit.clamp(1, 1000)),
                    cursor: None,
                };
                list(api, filter, output.output).await
            }
            WorkflowCommand::Describe {
                workflow_id,
                output,
            } => describe(api, &workflow_id, output.output).await,
            WorkflowCommand::History {
                workflow_id,
                output,
            } => {
                let events = api.history_from(&workflow_id, Seq::FIRST).await?;
                for event in &events {
                    match output.output {
                        OutputFormat::Json => println!("{}", serde_json::to_string(event)?),
                        OutputFormat::Text => println!("{}", history_line(event)),
                    }
                }
                Ok(())
            }
            WorkflowCommand::Watch { workflow_id } => {
                println!("{workflow_id}");
                let resume = format!("hcpflow workflow watch {workflow_id}");
                match follow(api, &workflow_id, true).await?.ended(
                    workflow_id.as_str(),
                    &resume,
                    false,
                )? {
                    Some(progress) => completed(&progress, workflow_id.as_str()),
                    None => Ok(()),
                }
            }
            WorkflowCommand::Cancel {
                workflow_id,
                reason,
            } => {
                api.request(&CancelRequest {
                    workflow_id: workflow_id.clone(),
                    reason,
                })
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
                api.request(&SignalRequest {
                    workflow_id: workflow_id.clone(),
                    signal: name.clone(),
                    payload,
                })
                .await?;
                println!("signal {name} recorded for {workflow_id}");
                Ok(())
            }
        }
    }
}

async fn list(api: &ApiClient, filter: ListRequest, format: OutputFormat) -> anyhow::Result<()> {
    let reply = api.request(&filter).await?;
    if format == OutputFormat::Json {
        println!("{}", serde_json::to_string_pretty(&reply.workflows)?);
        return Ok(());
    }
    println!(
        "{:<48} {:<24} {:<13} {:<16} UPDATED",
        "WORKFLOW ID", "TYPE", "STATUS", "KEY"
    );
    for w in &reply.workflows {
        println!(
            "{:<48} {:<24} {:<13} {:<16} {}",
            w.workflow_id.as_str(),
            w.workflow_type,
            w.status.as_str(),
            w.concurrency_key.as_deref().unwrap_or("-"),
            w.updated_at
        );
    }
    if reply.cursor.is_some() {
        println!("(more: raise --limit, or narrow with --status/--type/--cluster)");
    }
    Ok(())
}

async fn describe(
    api: &ApiClient,
    workflow_id: &WorkflowId,
    format: OutputFormat,
) -> anyhow::Result<()> {
    let workflow = api.describe(workflow_id).await?;
    if format == OutputFormat::Json {
        println!("{}", serde_json::to_string_pretty(&workflow)?);
        return Ok(());
    }
    let fields = [
        ("workflow_id", workflow.workflow_id.as_str()),
        ("workflow_type", &workflow.workflow_type),
        ("status", workflow.status.as_str()),
        (
            "concurrency_key",
            workflow.concurrency_key.as_deref().unwrap_or("-"),
        ),
        ("created_at", &workflow.created_at),
        ("updated_at", &workflow.updated_at),
    ];
    for (key, value) in fields {
        println!("{key:<16} {value}");
    }
    for (key, value) in [("output", &workflow.output), ("error", &workflow.error)] {
        if let Some(value) = value.as_ref().filter(|v| !v.is_null()) {
            println!("{key}:");
            for line in serde_json::to_string_pretty(value)?.lines() {
                println!("  {line}");
            }
        }
    }
    Ok(())
}

/// `  12  2026-11-23T07:24:41.123456Z  ActivityScheduled  aws.create_vpc  [3fa2b1c4…]`
fn history_line(entry: &HistoryEntry) -> String {
    let detail = match entry.event() {
        Ok(event) => event_detail(&event),
        Err(error) => format!("(not readable by this build: {error})"),
    };
    format!(
        "{:>5}  {}  {:<24} {detail}  [{}…]",
        entry.seq,
        entry.recorded_at,
        entry.kind,
        &entry.hash[..entry.hash.len().min(12)]
    )
}

/// What a history line says about one event beyond its kind.
fn event_detail(event: &Event) -> String {
    match event {
        Event::WorkflowStarted(started) => started.workflow_type.clone(),
        Event::ActivityScheduled(scheduled) => {
            let label = step_label(&scheduled.activity_type, &scheduled.input);
            match scheduled.compensation_of {
                Some(seq) => format!("{label} (undoes seq {seq})"),
                None => label,
            }
        }
        Event::CompensationRegistered(registered) => {
            step_label(&registered.activity_type, &registered.input)
        }
        Event::ActivityCompleted(done) => {
            format!("seq {} attempt {}", done.scheduled_seq, done.attempt)
        }
        Event::ActivityFailed(failed) => format!(
            "seq {} attempt {}: {}{}",
            failed.scheduled_seq,
            failed.attempt,
            failed.failure,
            if failed.retry_at.is_some() {
                " (retried)"
            } else {
                ""
            }
        ),
        Event::ResourceCreated(ResourceCreated {
            activity_seq,
            attempt,
            resource,
        })
        | Event::ResourceDeleted(ResourceDeleted {
            activity_seq,
            attempt,
            resource,
        }) => format!(
            "{} {} (seq {activity_seq} attempt {attempt})",
            resource.kind, resource.id
        ),
        Event::ResourceObserved(seen) => format!(
            "{} {} owned by {} (seq {} attempt {})",
            seen.resource.kind, seen.resource.id, seen.owner, seen.activity_seq, seen.attempt
        ),
        Event::TimerStarted(timer) => format!("{} ms", timer.duration_ms),
        Event::SignalReceived(signal) => signal.name.clone(),
        _ => String::new(),
    }
}
