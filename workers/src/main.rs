use clap::Parser;
use hcpflow_workers::cli::Cli;
use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    hcpflow_workers::tls::install_crypto_provider();
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_env("HCPFLOW_LOG")
                .unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn,async_nats=warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    match Cli::parse().run().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("hcpflow: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
