//! `hcpflow audit`: evidence about what workflows did.
//!
//! - `verify`: each history's hash chain in the database and its signed checkpoints (in
//!   Postgres and on the witness stream) against the audit public key, with a summary;
//! - `replay`: today's workflow code against the recorded history, the resource ledger,
//!   and what a destroy would undo;
//! - `export` / `verify-file`: a self-contained file of the chain and its signed head,
//!   checked offline (no database, no NATS) and replayed;
//! - `timeline`: the steps, retries and compensations in time, as text or HTML.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context};
use hcpflow_engine::{AuditPublicKey, AuditSigningKey, Checkpoint, HistoryEvent, Seq, WorkflowId};
use serde_json::{json, Value};

use crate::cli::cluster::{cluster_workflows, OutputArgs, OutputFormat};
use crate::cli::config::ClientArgs;
use crate::cli::progress::Progress;
use crate::cli::timeline::Timeline;
use hcpflow_audit::evidence::Evidence;
use hcpflow_audit::file::{self as audit_file, Header, RawEvent};
use hcpflow_audit::replay::{replay, ReplayReport};
use hcpflow_protocol::{ApiClient, VerifyRequest};

#[derive(Debug, clap::Subcommand)]
pub enum AuditCommand {
    /// Check workflows' hash chains and signed checkpoints, and summarise their
    /// histories; exits non-zero when anything does not hold, naming the first bad seq or
    /// the checkpoint that no longer matches.
    Verify {
        #[command(flatten)]
        key: PublicKeyArgs,
        /// Workflow ids.
        workflow_ids: Vec<WorkflowId>,
        /// Every workflow of this cluster (its create and what followed), oldest first.
        #[arg(long)]
        cluster: Option<String>,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Re-run today's workflow code against a recorded history: "deterministic", or the
    /// first divergence; then the resource ledger and what a destroy would run.
    Replay {
        workflow_id: WorkflowId,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Write a workflow's chain and signed head to a self-contained JSON-lines file.
    Export {
        workflow_id: WorkflowId,
        #[arg(long)]
        out: PathBuf,
    },
    /// Check an exported file offline — chain, signature — and replay it. Needs no
    /// database and no NATS.
    VerifyFile {
        file: PathBuf,
        #[command(flatten)]
        key: PublicKeyArgs,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Print the audit public key (for auditors) derived from the signing key.
    PublicKey {
        #[command(flatten)]
        key: PublicKeyArgs,
    },
    /// The workflow's steps, retries and compensations in time.
    Timeline {
        workflow_id: WorkflowId,
        /// Also write a Gantt-style HTML page here.
        #[arg(long)]
        html: Option<PathBuf>,
    },
}

impl AuditCommand {
    pub async fn run(self, client: &ClientArgs) -> anyhow::Result<()> {
        let connect = || client.api();
        match self {
            AuditCommand::Verify {
                key,
                mut workflow_ids,
                cluster,
                output,
            } => {
                let api = connect().await?;
                if let Some(cluster) = &cluster {
                    let (_, workflows) = cluster_workflows(&api, cluster).await?;
                    workflow_ids.extend(workflows.iter().rev().map(|w| w.workflow_id.clone()));
                }
                if workflow_ids.is_empty() {
                    bail!("name workflow ids, or --cluster NAME");
                }
                verify(&api, &key, &workflow_ids, output.output).await
            }
            AuditCommand::Replay {
                workflow_id,
                output,
            } => {
                let api = connect().await?;
                let raw = raw_history(&api, &workflow_id).await?;
                let history = decode(&workflow_id, &raw)?;
                let report = replay_with_this_build(&workflow_id, &history)?;
                print_replay(&workflow_id, &report, output.output)
            }
            AuditCommand::Export { workflow_id, out } => {
                let api = connect().await?;
                let text = export(&api, &workflow_id).await?;
                std::fs::write(&out, &text)
                    .with_context(|| format!("writing {}", out.display()))?;
                println!(
                    "exported {workflow_id} to {} ({} lines, signed head included)",
                    out.display(),
                    text.lines().count()
                );
                Ok(())
            }
            AuditCommand::VerifyFile { file, key, output } => {
                verify_file(&file, &key, output.output)
            }
            AuditCommand::PublicKey { key } => {
                let Some(key) = key.local()? else {
                    bail!("no key: set HCPFLOW_AUDIT_SIGNING_KEY (or give --public-key)");
                };
                println!("{}", key.to_base64());
                eprintln!("key id {}", key.key_id());
                Ok(())
            }
            AuditCommand::Timeline { workflow_id, html } => {
                timeline(&connect().await?, &workflow_id, html.as_deref()).await
            }
        }
    }
}

/// `verify-file`: an exported file checked offline, then replayed.
fn verify_file(
    file: &std::path::Path,
    key: &PublicKeyArgs,
    format: OutputFormat,
) -> anyhow::Result<()> {
    let Some(key) = key.local()? else {
        bail!("verify-file needs the audit public key: --public-key, --public-key-file or HCPFLOW_AUDIT_PUBLIC_KEY");
    };
    let text = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    let text = String::from_utf8(text)
        .map_err(|_| anyhow::anyhow!("{} is not UTF-8 text: altered?", file.display()))?;
    let verified = audit_file::read(&text, &key)
        .with_context(|| format!("{} does not verify", file.display()))?;
    let report = replay_with_this_build(&verified.workflow_id, &verified.history)?;
    if format == OutputFormat::Text {
        println!(
            "{}: {} events of {} ({}, {}); chain and signature verified (key {})",
            file.display(),
            verified.header.events,
            verified.workflow_id,
            verified.header.workflow_type,
            verified.header.status,
            verified.checkpoint.key_id
        );
    }
    print_replay(&verified.workflow_id, &report, format)
}

/// `timeline`: as text on the terminal, and as an HTML page when asked.
async fn timeline(
    api: &ApiClient,
    workflow_id: &WorkflowId,
    html: Option<&std::path::Path>,
) -> anyhow::Result<()> {
    let raw = raw_history(api, workflow_id).await?;
    let timeline = Timeline::build(workflow_id.as_str(), &decode(workflow_id, &raw)?);
    let width = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse::<usize>().ok())
        .unwrap_or(120);
    print!("{}", timeline.text(width.saturating_sub(80).clamp(20, 80)));
    if let Some(path) = html {
        std::fs::write(path, timeline.html())
            .with_context(|| format!("writing {}", path.display()))?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

/// Every event with its exact stored bytes.
async fn raw_history(api: &ApiClient, workflow_id: &WorkflowId) -> anyhow::Result<Vec<RawEvent>> {
    api.history_from_raw(workflow_id, Seq::FIRST)
        .await?
        .into_iter()
        .map(|entry| {
            Ok(RawEvent {
                seq: entry.seq.get(),
                hash: entry.hash,
                body: entry
                    .body
                    .with_context(|| format!("entry {} came without its body", entry.seq))?,
            })
        })
        .collect()
}

fn decode(id: &WorkflowId, raw: &[RawEvent]) -> anyhow::Result<Vec<HistoryEvent>> {
    raw.iter()
        .map(|e| {
            audit_file::to_history_event(id, e.seq, e.body.as_bytes())
                .map_err(|reason| anyhow::anyhow!("event {}: {reason}", e.seq))
        })
        .collect()
}

fn replay_with_this_build(
    id: &WorkflowId,
    history: &[HistoryEvent],
) -> anyhow::Result<ReplayReport> {
    // Every type this build knows, the built-in ones included: any history may be
    // audited, wherever it ran.
    let (catalog, _) = crate::catalog::build(None, None, true)?;
    Ok(replay(catalog.registry(), id, history))
}

fn print_replay(
    id: &WorkflowId,
    report: &ReplayReport,
    format: OutputFormat,
) -> anyhow::Result<()> {
    if format == OutputFormat::Json {
        println!("{}", serde_json::to_string_pretty(report)?);
    } else {
        match &report.divergence {
            None => println!(
                "replay of {id}: {} events ({}) against this build: deterministic",
                report.events, report.status
            ),
            Some(d) => println!(
                "replay of {id}: DIVERGES at seq {}: recorded {}, today's code does {}",
                d.seq, d.recorded, d.new
            ),
        }
        println!("\nresource ledger ({} entries):", report.ledger.len());
        for line in &report.ledger {
            println!(
                "  {} {:<7} {:<26} {}  by {} (seq {}, attempt {})",
                line.at, line.action, line.kind, line.id, line.step, line.step_seq, line.attempt
            );
        }
        println!(
            "\na destroy would run ({}):",
            report.destroy_would_run.len()
        );
        for (n, step) in report.destroy_would_run.iter().enumerate() {
            println!("  {:>3}. {step}", n + 1);
        }
    }
    if let Some(d) = &report.divergence {
        bail!(
            "{id} does not replay: seq {}: recorded {}, now {}",
            d.seq,
            d.recorded,
            d.new
        );
    }
    Ok(())
}

/// The file `audit export` writes: the history up to its latest signed head.
async fn export(api: &ApiClient, workflow_id: &WorkflowId) -> anyhow::Result<String> {
    let (_, evidence) = evidence(api, workflow_id).await?;
    if !evidence.verified {
        bail!(
            "{workflow_id}'s chain is broken at seq {}: {}",
            evidence.first_bad_seq.unwrap_or_default(),
            evidence.reason.unwrap_or_default()
        );
    }
    let checkpoint: Checkpoint = [evidence.checkpoints.database, evidence.checkpoints.witness]
        .into_iter()
        .flatten()
        .max_by_key(|c| c.seq)
        .context("not signed yet: nothing to export (a running workflow is signed every minute, an ended one at once)")?;
    let mut raw = raw_history(api, workflow_id).await?;
    raw.truncate(usize::try_from(checkpoint.seq.get()).unwrap_or(usize::MAX));
    let history = decode(workflow_id, &raw)?;
    let started = match history.first().map(|e| &e.event) {
        Some(hcpflow_engine::Event::WorkflowStarted(started)) => started.workflow_type.clone(),
        _ => bail!("{workflow_id}'s history does not begin with WorkflowStarted"),
    };
    let header = Header {
        hcpflow_export: audit_file::FORMAT_VERSION,
        workflow_id: workflow_id.to_string(),
        workflow_type: started,
        status: hcpflow_engine::history::status(&history)
            .as_str()
            .to_owned(),
        events: raw.len() as u64,
    };
    Ok(audit_file::write(&header, &raw, &checkpoint)?)
}

/// The audit public key an auditor trusts: given, read from a file, or derived from the
/// signing key — never the one a server reports, since a server an attacker controls
/// would report its own.
#[derive(Debug, Clone, clap::Args)]
pub struct PublicKeyArgs {
    /// The audit public key (base64 or hex). Default: derived from
    /// HCPFLOW_AUDIT_SIGNING_KEY when set.
    #[arg(long, env = "HCPFLOW_AUDIT_PUBLIC_KEY")]
    pub public_key: Option<String>,
    /// A file holding the audit public key (as `hcpflow audit public-key` prints it).
    #[arg(long, env = "HCPFLOW_AUDIT_PUBLIC_KEY_FILE")]
    pub public_key_file: Option<PathBuf>,
    #[arg(
        long,
        env = "HCPFLOW_AUDIT_SIGNING_KEY",
        hide = true,
        hide_env_values = true
    )]
    pub signing_key: Option<String>,
}

impl PublicKeyArgs {
    /// The key given, read from its file, or derived from the signing key; `None` when
    /// none is set.
    pub fn local(&self) -> anyhow::Result<Option<AuditPublicKey>> {
        if let Some(text) = &self.public_key {
            return Ok(Some(AuditPublicKey::from_text(text)?));
        }
        if let Some(path) = &self.public_key_file {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading the audit public key from {}", path.display()))?;
            return Ok(Some(AuditPublicKey::from_text(text.trim()).with_context(
                || format!("{} does not hold an audit public key", path.display()),
            )?));
        }
        match &self.signing_key {
            Some(text) => Ok(Some(*AuditSigningKey::from_text(text)?.public_key())),
            None => Ok(None),
        }
    }
}

/// How long `verify` waits for an ended workflow's final checkpoint.
const FINAL_CHECKPOINT_WAIT: Duration = Duration::from_secs(10);

pub async fn evidence(api: &ApiClient, id: &WorkflowId) -> anyhow::Result<(Value, Evidence)> {
    let deadline = tokio::time::Instant::now() + FINAL_CHECKPOINT_WAIT;
    loop {
        let reply = api
            .request(&VerifyRequest {
                workflow_id: id.clone(),
            })
            .await?;
        let evidence: Evidence = serde_json::from_value(reply.clone())
            .map_err(|e| anyhow::anyhow!("the verify reply for {id} is not evidence: {e}"))?;
        if !evidence.awaits_final_checkpoint() || tokio::time::Instant::now() >= deadline {
            return Ok((reply, evidence));
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

async fn verify(
    api: &ApiClient,
    key: &PublicKeyArgs,
    ids: &[WorkflowId],
    format: OutputFormat,
) -> anyhow::Result<()> {
    let local_key = key.local()?;
    let mut reports = Vec::new();
    for id in ids {
        reports.push(verify_one(api, local_key, id).await?);
    }
    match format {
        OutputFormat::Json => println!("{}", serde_json::to_string_pretty(&reports)?),
        OutputFormat::Text => {
            for report in &reports {
                println!("{}", report_line(report));
            }
        }
    }
    let bad: Vec<String> = reports
        .iter()
        .filter(|report| report["verified"] != json!(true))
        .map(|report| {
            let problems: Vec<&str> = report["problems"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            format!(
                "{}: {}",
                report["workflow_id"].as_str().unwrap_or("?"),
                problems.join("; ")
            )
        })
        .collect();
    if !bad.is_empty() {
        bail!("the audit failed: {}", bad.join(" | "));
    }
    Ok(())
}

/// One workflow's audit report: the evidence judged with the key, and a summary of its
/// history.
async fn verify_one(
    api: &ApiClient,
    local_key: Option<AuditPublicKey>,
    id: &WorkflowId,
) -> anyhow::Result<Value> {
    let (reply, evidence) = evidence(api, id).await?;
    let Some(key) = local_key else {
        let reported = evidence
            .audit_public_key
            .as_deref()
            .and_then(|text| AuditPublicKey::from_text(text).ok())
            .map(|key| format!(" (the server reports key id {})", key.key_id()))
            .unwrap_or_default();
        bail!(
            "no audit public key to trust: give --public-key, --public-key-file or HCPFLOW_AUDIT_PUBLIC_KEY{reported}; the key a server reports is not trusted, since a server an attacker controls would report its own"
        );
    };
    let findings = evidence.judge(&key);
    let mut progress = Progress::new();
    for entry in api.history_from(id, Seq::FIRST).await? {
        progress.apply(&entry);
    }
    Ok(json!({
        "workflow_id": id,
        "workflow_type": progress.workflow_type,
        "status": evidence.status,
        "verified": findings.problems.is_empty(),
        "problems": findings.problems,
        "notes": findings.notes,
        "signed_seq": findings.signed_seq,
        "key_id": key.key_id(),
        "chain": {"verified": reply["verified"], "events": reply["events"],
                  "head_hash": reply["head_hash"], "first_bad_seq": reply["first_bad_seq"]},
        "events": progress.events,
        "resources_created": progress.created,
        "resources_deleted": progress.deleted,
        "resources_observed": progress.observed,
        "retries": progress.retries,
        "compensations": progress.compensations,
    }))
}

fn report_line(report: &Value) -> String {
    let verdict = if report["verified"] == json!(true) {
        let head = report["chain"]["head_hash"].as_str().unwrap_or("");
        format!(
            "chain verified, head {}…, signed at seq {} by key {}",
            &head[..head.len().min(12)],
            report["signed_seq"],
            report["key_id"].as_str().unwrap_or("?")
        )
    } else {
        "NOT VERIFIED".to_owned()
    };
    let mut lines = vec![format!(
        "{} {} {}\n    {} events, {} resources created, {} deleted, {} observed, {} retries, {} compensations; {verdict}",
        report["workflow_id"].as_str().unwrap_or("?"),
        report["workflow_type"].as_str().unwrap_or("?"),
        report["status"].as_str().unwrap_or("?"),
        report["events"],
        report["resources_created"],
        report["resources_deleted"],
        report["resources_observed"],
        report["retries"],
        report["compensations"],
    )];
    for problem in report["problems"].as_array().into_iter().flatten() {
        lines.push(format!("    ✗ {}", problem.as_str().unwrap_or("?")));
    }
    for note in report["notes"].as_array().into_iter().flatten() {
        lines.push(format!("    · {}", note.as_str().unwrap_or("?")));
    }
    lines.join("\n")
}
