//! The emulator as a service: Options → [`start`] → [`Handle`]. Serves HTTP/1.1 on the
//! given address, runs the simulated operator, and (with a state file) saves the store
//! after writes and loads it at start, so a restart keeps the objects.
//!
//! [`start_with`] also says how the HyperShift operator was installed ([`Install`]):
//! with the AWS private platform or without, and whether the operators' cloud side runs
//! against an AWS endpoint ([`crate::operator::cloud`]). [`start`] is an operator
//! installed without private platform and no cloud side.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::http::{handle, Shared};
use crate::operator::cloud::{CleanupGate, Cloud, Settings};
use crate::operator::{install, Operator, Timing};
use crate::store::Store;

#[derive(Debug, Clone)]
pub struct Options {
    pub listen: SocketAddr,
    /// Where the objects are kept across restarts; `None`: memory only.
    pub state_file: Option<PathBuf>,
    pub timing: Timing,
    /// How many changes a watch can resume from ([`crate::store::EVENT_LOG`]).
    pub event_log: usize,
}

/// How `hypershift install` set the operator up, and whether its cloud side runs.
#[derive(Debug, Clone, Default)]
pub struct Install {
    /// `--private-platform AWS --aws-private-region <region>`; `None`: installed
    /// without private platform (only Public clusters are supported).
    pub private_region: Option<String>,
    /// The operators' cloud side, against this AWS endpoint; `None`: off.
    pub cloud: Option<Settings>,
}

impl Install {
    /// A private platform in the cloud side's region, with the cloud side on.
    pub fn with_cloud(settings: Settings) -> Self {
        Self {
            private_region: Some(settings.region.clone()),
            cloud: Some(settings),
        }
    }
}

/// A running emulator.
#[derive(Debug)]
pub struct Handle {
    pub addr: SocketAddr,
    pub shared: Shared,
    stop: watch::Sender<bool>,
}

impl Handle {
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops accepting connections and the background loops.
    pub fn stop(&self) {
        let _ = self.stop.send(true);
    }
}

fn load(path: &PathBuf) -> anyhow::Result<Store> {
    match std::fs::read(path) {
        Ok(bytes) => {
            Store::restore(&bytes).with_context(|| format!("reading state file {}", path.display()))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Store::new()),
        Err(e) => Err(e).with_context(|| format!("reading state file {}", path.display())),
    }
}

/// Writes the snapshot next to the file and renames it over: a crash leaves the old
/// state or the new one, never half of one.
fn save(path: &PathBuf, bytes: &[u8]) -> std::io::Result<()> {
    let temporary = path.with_extension("tmp");
    std::fs::write(&temporary, bytes)?;
    std::fs::rename(&temporary, path)
}

/// Binds and starts serving, with an operator installed without private platform and
/// no cloud side.
pub async fn start(options: Options) -> anyhow::Result<Handle> {
    start_with(options, Install::default()).await
}

/// Binds and starts serving, with the operator installed as `install` says.
pub async fn start_with(options: Options, install: Install) -> anyhow::Result<Handle> {
    let store = match &options.state_file {
        Some(path) => load(path)?,
        None => Store::new(),
    };
    let mut store = store.with_log_capacity(options.event_log);
    store.bootstrap();
    install::ensure(&mut store, install.private_region.as_deref());
    let shared = Shared::new(store);
    let listener = TcpListener::bind(options.listen)
        .await
        .with_context(|| format!("binding {}", options.listen))?;
    let addr = listener.local_addr()?;
    let (stop, stopped) = watch::channel(false);

    let serving = shared.clone();
    let mut until = stopped.clone();
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                biased;
                _ = until.changed() => return,
                accepted = listener.accept() => accepted,
            };
            let Ok((stream, _)) = accepted else { continue };
            let shared = serving.clone();
            tokio::spawn(async move {
                let service = service_fn(move |request| handle(shared.clone(), request));
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });

    let mut operator = Operator::new(options.timing);
    if let Some(settings) = install.cloud {
        let gate = CleanupGate::default();
        operator = operator.with_cleanup(gate.clone());
        let cloud = Cloud::new(settings, gate).await;
        let running = shared.clone();
        let mut until = stopped.clone();
        tokio::spawn(async move {
            tokio::select! {
                biased;
                _ = until.changed() => {}
                () = cloud.run(running) => {}
            }
        });
    }
    let running = shared.clone();
    let mut until = stopped.clone();
    tokio::spawn(async move {
        tokio::select! {
            biased;
            _ = until.changed() => {}
            () = operator.run(running) => {}
        }
    });

    if let Some(path) = options.state_file.clone() {
        let saving = shared.clone();
        let mut until = stopped;
        tokio::spawn(async move {
            let mut saved = None;
            loop {
                let stopping = tokio::select! {
                    biased;
                    _ = until.changed() => true,
                    () = tokio::time::sleep(Duration::from_millis(250)) => false,
                };
                let (version, bytes) =
                    saving.with(|store| (store.resource_version(), store.snapshot()));
                if saved != Some(version) {
                    if let Err(e) = save(&path, &bytes) {
                        tracing::warn!(error = %e, path = %path.display(), "saving the emulator state failed");
                    } else {
                        saved = Some(version);
                    }
                }
                if stopping {
                    return;
                }
            }
        });
    }
    Ok(Handle { addr, shared, stop })
}
