//! The `hcpflow` command line.

use anyhow::Context;
use clap::{Parser, Subcommand};

use crate::cli::audit::AuditCommand;
use crate::cli::bench::{self, BenchArgs};
use crate::cli::cluster::ClusterCommand;
use crate::cli::config::{ClientArgs, ConfigArgs};
use crate::cli::soak::{self, SoakArgs};
use crate::cli::workflow::WorkflowCommand;
use crate::roles::server::{self, Role};
use hcpflow_protocol::Secret;

#[derive(Debug, Parser)]
#[command(
    name = "hcpflow",
    version,
    about = "Durable workflows that provision HyperShift hosted clusters on AWS"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Apply the database migrations, grant the application role its rights, and create
    /// the NATS streams.
    Migrate(MigrateArgs),
    /// Run every role in one process: API, workflow and activity workers, relay, timers.
    Server(ConfigArgs),
    /// Run some roles only.
    Worker(WorkerArgs),
    /// Create, scale, destroy and inspect hosted clusters (through the NATS API).
    Cluster(ClusterArgs),
    /// Any workflow: list, describe, history, watch, cancel, signal (through the NATS API).
    Workflow(WorkflowArgs),
    /// Audit evidence: verify workflows' hash chains (through the NATS API).
    Audit(AuditArgs),
    /// Benchmark a running server over NATS.
    Bench(BenchCommand),
    /// Hold a mixed load on a running server for a long time (20 minutes by default) and
    /// report every minute; fails if anything failed or grew over the last half.
    Soak(SoakCommand),
    /// Print the settings a server would run with (flags over environment over the
    /// config file over defaults; secrets shown only as set), as JSON.
    Config(ConfigArgs),
    /// NATS deployment: `permissions` prints the accounts configuration of every role.
    #[command(subcommand)]
    Nats(NatsCommand),
    /// Seal keys: `status` says which key ids live workflows still need.
    #[command(subcommand)]
    Seal(SealCommand),
}

#[derive(Debug, Subcommand)]
pub enum SealCommand {
    /// Every seal key id configured here, recorded by a server, or held by a live
    /// workflow's sealed values; fails if a live workflow needs a key this configuration
    /// lacks, or if a configured key is not the one its id sealed with.
    Status(SealStatusArgs),
}

#[derive(Debug, clap::Args)]
pub struct SealStatusArgs {
    #[command(flatten)]
    pub output: crate::cli::cluster::OutputArgs,
    #[command(flatten)]
    pub config: ConfigArgs,
}

#[derive(Debug, Subcommand)]
pub enum NatsCommand {
    /// The NATS accounts configuration that gives each process role and each tenant's
    /// reader, operator and admin exactly the subjects it needs (see deploy/nats/).
    Permissions(PermissionsArgs),
}

#[derive(Debug, clap::Args)]
pub struct PermissionsArgs {
    /// Subject and stream prefix.
    #[arg(long, default_value = crate::cli::config::DEFAULT_PREFIX)]
    pub prefix: String,
    /// The tenants that get client users (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "default")]
    pub tenants: Vec<String>,
    /// The activity task queues the activity role consumes (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "default")]
    pub task_queues: Vec<String>,
    /// Write the configuration to this file instead of printing it.
    #[arg(long, conflicts_with = "check")]
    pub output: Option<std::path::PathBuf>,
    /// Fail unless this file holds exactly what would be generated.
    #[arg(long)]
    pub check: Option<std::path::PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct WorkflowArgs {
    #[command(subcommand)]
    pub command: WorkflowCommand,
    #[command(flatten)]
    pub client: ClientArgs,
}

#[derive(Debug, clap::Args)]
pub struct AuditArgs {
    #[command(subcommand)]
    pub command: AuditCommand,
    #[command(flatten)]
    pub client: ClientArgs,
}

#[derive(Debug, clap::Args)]
pub struct ClusterArgs {
    #[command(subcommand)]
    pub command: ClusterCommand,
    #[command(flatten)]
    pub client: ClientArgs,
}

/// `--database-admin-url` (the owner) is required; `--database-url` names the
/// application role that gets append-only rights.
#[derive(Debug, clap::Args)]
pub struct MigrateArgs {
    /// Skip creating the NATS streams.
    #[arg(long)]
    pub no_streams: bool,
    #[command(flatten)]
    pub config: ConfigArgs,
}

#[derive(Debug, clap::Args)]
pub struct WorkerArgs {
    /// api, workflow, activity, relay or timer; repeat or comma-separate for several.
    #[arg(long = "role", required = true, value_delimiter = ',')]
    pub roles: Vec<Role>,
    #[command(flatten)]
    pub config: ConfigArgs,
}

#[derive(Debug, clap::Args)]
pub struct SoakCommand {
    #[command(flatten)]
    pub soak: SoakArgs,
    #[command(flatten)]
    pub config: ConfigArgs,
}

#[derive(Debug, clap::Args)]
pub struct BenchCommand {
    #[command(flatten)]
    pub bench: BenchArgs,
    #[command(flatten)]
    pub config: ConfigArgs,
}

impl Cli {
    pub async fn run(self) -> anyhow::Result<()> {
        match self.command {
            Command::Migrate(args) => {
                let settings = args.config.migrate_settings()?;
                let role = crate::cli::migrate::database(
                    settings.admin_url.expose(),
                    settings.app_url.as_ref().map(Secret::expose),
                )
                .await?;
                match role {
                    Some(role) => {
                        println!("database migrated; application role {role} may read and append")
                    }
                    None => {
                        println!("database migrated (no application role given: no grants changed)")
                    }
                }
                if !args.no_streams {
                    crate::cli::migrate::streams(
                        &settings.nats,
                        &settings.prefix,
                        settings.stream_limits,
                    )
                    .await
                    .context("creating the NATS streams")?;
                    println!("NATS streams ready under prefix {}", settings.prefix);
                }
                Ok(())
            }
            Command::Server(config) => {
                let config = config.resolve()?;
                server::run(config, &Role::ALL, server::shutdown_on_signals()).await
            }
            Command::Worker(args) => {
                let config = args.config.resolve()?;
                let mut roles = args.roles;
                roles.sort();
                roles.dedup();
                server::run(config, &roles, server::shutdown_on_signals()).await
            }
            Command::Cluster(args) => args.command.run(&args.client.api().await?).await,
            Command::Workflow(args) => args.command.run(&args.client.api().await?).await,
            Command::Audit(args) => args.command.run(&args.client).await,
            Command::Nats(NatsCommand::Permissions(args)) => permissions(&args),
            Command::Seal(SealCommand::Status(args)) => {
                crate::cli::seal::status(&args.config.resolve()?, args.output.output).await
            }
            Command::Bench(args) => {
                let (nats, prefix) = args.config.client.nats()?;
                let database_url = args.config.database_url()?;
                let report = bench::run(
                    &nats,
                    &prefix,
                    database_url.as_ref().map(Secret::expose),
                    &args.bench,
                )
                .await?;
                report.print(&args.bench);
                if report.failed > 0 {
                    anyhow::bail!(
                        "{} of {} workflows did not complete",
                        report.failed,
                        args.bench.count
                    );
                }
                Ok(())
            }
            Command::Soak(args) => {
                let (nats, prefix) = args.config.client.nats()?;
                let database_url = args.config.database_url()?;
                let passed = soak::run(
                    &nats,
                    &prefix,
                    database_url.as_ref().map(Secret::expose),
                    &args.soak,
                )
                .await?;
                anyhow::ensure!(passed, "the soak failed (see its verdict above)");
                Ok(())
            }
            Command::Config(config) => {
                let config = config.resolve()?;
                println!("{}", serde_json::to_string_pretty(&config.describe())?);
                Ok(())
            }
        }
    }
}

/// `hcpflow nats permissions`: prints, writes or checks the accounts configuration.
fn permissions(args: &PermissionsArgs) -> anyhow::Result<()> {
    use crate::cli::nats_permissions::Deployment;
    let deployment = Deployment {
        subjects: hcpflow_protocol::Subjects::new(&args.prefix)?,
        tenants: args
            .tenants
            .iter()
            .map(|t| hcpflow_engine::TenantId::new(t.as_str()))
            .collect::<Result<_, _>>()?,
        task_queues: args.task_queues.clone(),
    };
    let text = deployment.render();
    match (&args.output, &args.check) {
        (Some(path), _) => {
            std::fs::write(path, &text).with_context(|| format!("writing {}", path.display()))
        }
        (None, Some(path)) => {
            let shipped = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            anyhow::ensure!(
                shipped == text,
                "{} differs from what `hcpflow nats permissions` generates for these settings: regenerate it with --output",
                path.display()
            );
            println!("{} matches the generated configuration", path.display());
            Ok(())
        }
        (None, None) => {
            print!("{text}");
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }
}
