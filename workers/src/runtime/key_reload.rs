//! Seal keys from files, reloaded when the files change: a rotation's steps become a
//! change of the mounted file (a Kubernetes Secret volume, a secrets agent) instead of a
//! restart. A changed file is put in force only if it parses and passes the start-up
//! check ([`check_seal_keys`]); otherwise the keys in force stay and the error is logged.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use hcpflow_engine::{Keyring, SealKeys};
use hcpflow_eventstore::EventStore;
use hcpflow_protocol::Secret;
use sha2::{Digest, Sha256};
use tokio::sync::watch;

use crate::runtime::seal_key_check::check_seal_keys;

/// The key files a process was given (`None`: that key came some other way and stays).
#[derive(Debug, Clone)]
pub struct KeyFiles {
    pub seal: Option<PathBuf>,
    pub input_digest: Option<PathBuf>,
}

/// The keyring `seal` and `input_digest` make; without a digest key, digests follow
/// the active seal key (and a rotation turns resubmissions into conflicts: say so).
pub fn keyring(seal: &Secret, input_digest: Option<&Secret>) -> anyhow::Result<Keyring> {
    let keyring = Keyring::parse(seal.expose()).context("HCPFLOW_SEAL_KEY")?;
    match input_digest {
        Some(key) => keyring
            .with_digest_key(key.expose())
            .context("HCPFLOW_INPUT_DIGEST_KEY"),
        None => {
            tracing::warn!("no HCPFLOW_INPUT_DIGEST_KEY: input digests are keyed by the active seal key, so rotating it turns an identical resubmission of an earlier start into a conflict");
            Ok(keyring)
        }
    }
}

/// Watches the files until `shutdown`: every `every`, a change of either file's bytes
/// loads, checks and (if both pass) puts the new keyring in force. `input_digest` is the
/// digest key given otherwise than by file (kept as it is). Without a seal key file
/// there is nothing to watch. The first look loads the files as they are then, so a
/// change between the start's read and this task's start is not missed.
pub async fn reload_on_change(
    keys: Arc<SealKeys>,
    files: KeyFiles,
    input_digest: Option<Secret>,
    store: EventStore,
    every: Duration,
    mut shutdown: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let Some(seal_file) = files.seal.clone() else {
        return Ok(());
    };
    // Only a digest of what was read is kept, never the key bytes.
    let fingerprint = |files: &KeyFiles| -> std::io::Result<[u8; 32]> {
        let mut hash = Sha256::new();
        for path in [files.seal.as_ref(), files.input_digest.as_ref()]
            .into_iter()
            .flatten()
        {
            hash.update(std::fs::read(path)?);
            hash.update([0]);
        }
        Ok(hash.finalize().into())
    };
    let mut seen = None;
    let mut first = true;
    loop {
        if !std::mem::take(&mut first) {
            tokio::select! {
                () = tokio::time::sleep(every) => {}
                _ = shutdown.changed() => return Ok(()),
            }
        }
        if *shutdown.borrow() {
            return Ok(());
        }
        let now = match fingerprint(&files) {
            Ok(now) => now,
            Err(error) => {
                tracing::warn!(file = %seal_file.display(), %error, "the seal key files cannot be read; the keys in force stay");
                continue;
            }
        };
        if seen == Some(now) {
            continue;
        }
        match load(&files, input_digest.as_ref(), &store).await {
            Ok(keyring) => {
                let ids: Vec<&str> = keyring.key_ids().collect();
                let unchanged = ids == keys.current().key_ids().collect::<Vec<_>>();
                // The first look finds, most often, the keys the process started with.
                if seen.is_some() || !unchanged {
                    tracing::info!(
                        active = keyring.active_key_id(),
                        keys = ids.join(","),
                        "seal keys reloaded"
                    );
                }
                keys.replace(keyring);
                seen = Some(now);
            }
            // The database could not say: the same bytes are tried again next time.
            Err(error) if is_passing(&error) => {
                tracing::warn!(
                    error = format!("{error:#}"),
                    "checking the changed seal keys failed for now; trying again"
                );
            }
            // A half-written or wrong file: looked at again once it changes.
            Err(error) => {
                tracing::error!(
                    error = format!("{error:#}"),
                    "the changed seal key files are refused; the keys in force stay"
                );
                seen = Some(now);
            }
        }
    }
}

/// A key as its file `name` (`HCPFLOW_SEAL_KEY_FILE`, ...) holds it, surrounding
/// whitespace dropped; an unreadable file is an error naming the setting and the path.
pub fn read_key_file(name: &str, path: &std::path::Path) -> anyhow::Result<Secret> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("{name}: reading {}", path.display()))?;
    Ok(Secret::new(text.trim().to_owned()))
}

/// Whether the refusal came from a store error that may pass.
fn is_passing(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<hcpflow_eventstore::Error>()
            .is_some_and(hcpflow_eventstore::Error::is_retryable)
    })
}

async fn load(
    files: &KeyFiles,
    input_digest: Option<&Secret>,
    store: &EventStore,
) -> anyhow::Result<Keyring> {
    let seal = match &files.seal {
        Some(path) => read_key_file("HCPFLOW_SEAL_KEY_FILE", path)?,
        None => anyhow::bail!("no seal key file"),
    };
    let digest = match &files.input_digest {
        Some(path) => Some(read_key_file("HCPFLOW_INPUT_DIGEST_KEY_FILE", path)?),
        None => input_digest.cloned(),
    };
    let keyring = keyring(&seal, digest.as_ref())?;
    check_seal_keys(store, &keyring).await?;
    Ok(keyring)
}
