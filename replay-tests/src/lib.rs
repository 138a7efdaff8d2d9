//! Golden histories replayed against today's workflow code.
//!
//! `histories/<workflow type>/<case>.jsonl` are audit exports (`hcpflow audit export`)
//! of real runs on the local stack, recorded by `record-goldens.sh`; each is signed by
//! the recording's key, whose public half is `histories/keys/<key id>.pub`. The tests in
//! `tests/it` check every file offline (chain, signature) and replay it: a change to a
//! workflow that would make an existing history diverge fails here before it ships —
//! such a change needs `ctx.patched(...)` (see `scale_node_pool` and its `-patched`
//! goldens).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use hcpflow_audit::file::{self as audit_file, VerifiedExport};
use hcpflow_engine::{AuditPublicKey, Catalog};

/// The workflow types golden histories hold: the HyperShift workflows, registered as
/// the server registers them.
pub fn catalog() -> Catalog {
    let mut catalog = Catalog::new();
    hcpflow_hypershift::catalog::register_workflows(&mut catalog)
        .expect("the HyperShift workflow types are distinct");
    catalog
}

/// `replay-tests/histories`, of the checkout under test: cargo names the crate's
/// directory when it runs the tests, which beats the directory the binary was built in
/// (a build directory shared by several checkouts may hold a binary built elsewhere).
pub fn histories_dir() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .filter(|dir| dir.join("histories").is_dir())
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf())
        .join("histories")
}

/// Every golden history, sorted.
pub fn golden_files() -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for kind in std::fs::read_dir(histories_dir())? {
        let kind = kind?.path();
        if !kind.is_dir() || kind.ends_with("keys") {
            continue;
        }
        for file in std::fs::read_dir(&kind)? {
            let file = file?.path();
            if file.extension().is_some_and(|e| e == "jsonl") {
                files.push(file);
            }
        }
    }
    files.sort();
    Ok(files)
}

/// The recording keys, by key id.
pub fn keys() -> anyhow::Result<BTreeMap<String, AuditPublicKey>> {
    let mut keys = BTreeMap::new();
    for file in std::fs::read_dir(histories_dir().join("keys"))? {
        let file = file?.path();
        let text = std::fs::read_to_string(&file)?;
        let key = AuditPublicKey::from_text(&text)
            .with_context(|| format!("{} is not a public key", file.display()))?;
        keys.insert(key.key_id(), key);
    }
    Ok(keys)
}

/// Reads and verifies a golden history with the key that signed it.
pub fn load(path: &Path) -> anyhow::Result<VerifiedExport> {
    let text = std::fs::read_to_string(path)?;
    let trailer: serde_json::Value = serde_json::from_str(
        text.lines()
            .last()
            .with_context(|| format!("{} is empty", path.display()))?,
    )?;
    let key_id = trailer["checkpoint"]["key_id"]
        .as_str()
        .with_context(|| format!("{} has no signed head", path.display()))?;
    let keys = keys()?;
    let key = keys
        .get(key_id)
        .with_context(|| format!("{}: no key {key_id} in histories/keys", path.display()))?;
    audit_file::read(&text, key).with_context(|| format!("{} does not verify", path.display()))
}
