//! The `hcpflow` command line.
//!
//! Configuration is layered: defaults, then `HCPFLOW_*` environment variables (what
//! `.dev/env` writes), then flags.

use anyhow::Context;
use clap::{Parser, Subcommand};

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
    /// Apply the database migrations and grant the application role its rights.
    Migrate(MigrateArgs),
}

#[derive(Debug, clap::Args)]
pub struct MigrateArgs {
    /// The migration owner's Postgres URL.
    #[arg(long, env = "HCPFLOW_DATABASE_ADMIN_URL", hide_env_values = true)]
    pub database_admin_url: String,
    /// The application's Postgres URL; its role is granted append-only rights.
    #[arg(long, env = "HCPFLOW_DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
}

impl Cli {
    pub async fn run(self) -> anyhow::Result<()> {
        match self.command {
            Command::Migrate(args) => migrate(args).await,
        }
    }
}

async fn migrate(args: MigrateArgs) -> anyhow::Result<()> {
    let role = args
        .database_url
        .as_deref()
        .map(hcpflow_eventstore::migrate::role_of_url)
        .transpose()
        .context("reading the application role from --database-url")?;
    hcpflow_eventstore::migrate::run_with_url(&args.database_admin_url, role.as_deref())
        .await
        .context("migrating the database")?;
    match role {
        Some(role) => println!("database migrated; application role {role} may read and append"),
        None => println!("database migrated (no application role given: no grants changed)"),
    }
    Ok(())
}
