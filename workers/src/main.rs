use clap::Parser;
use hcpflow_workers::cli::commands::Cli;
use tracing_subscriber::EnvFilter;

#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    exit_quietly_when_stdout_closes();
    hcpflow_workers::runtime::tls::install_crypto_provider();
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

/// `hcpflow ... | head` closes stdout early; end as a process killed by SIGPIPE would
/// (status 141) instead of panicking in `println!`.
fn exit_quietly_when_stdout_closes() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("");
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(141);
        }
        default(info);
    }));
}
