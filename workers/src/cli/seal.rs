//! `hcpflow seal status`: the seal keys as the database knows them — which key ids the
//! live workflows' histories still hold sealed values of, and whether this
//! configuration has each (and has the right bytes for it, by the start-up check's
//! value). The gate of a rotation's last step: an old key may go when no live workflow
//! needs it. Read-only.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{bail, Context};
use hcpflow_engine::Keyring;
use hcpflow_eventstore::EventStore;
use serde::Serialize;

use crate::cli::cluster::OutputFormat;
use crate::cli::config::Config;
use crate::runtime::seal_key_check::opens_check_value;

/// Where a key id stands in this configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum Here {
    /// The first key: it seals.
    Active,
    /// Configured: it opens.
    Configured,
    /// Not configured here.
    Missing,
}

/// What the start-up check's value says of this configuration's key of that id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum Check {
    /// It opens the value the id sealed when first used.
    Ok,
    /// It does not: the id is right, the bytes are not.
    WrongKey,
    /// No server has run with the id yet.
    NotRecorded,
    /// Nothing to check (the key is not configured here).
    None,
}

/// One key id, as configured here and as the database knows it.
#[derive(Debug, Serialize)]
struct KeyStatus {
    key_id: String,
    here: Here,
    check: Check,
    /// Live workflows holding values sealed with it.
    live_workflows: i64,
    oldest_value: Option<String>,
}

pub async fn status(config: &Config, format: OutputFormat) -> anyhow::Result<()> {
    let store = EventStore::connect(config.database_url.expose(), 2)
        .await
        .context("connecting to Postgres")?;
    let keyring = match &config.seal_key {
        Some(key) => Some(Keyring::parse(key.expose()).context("HCPFLOW_SEAL_KEY")?),
        None => None,
    };
    let in_use = store.seal_keys_in_use().await?;
    let checked: BTreeMap<String, String> = store.checked_seal_keys().await?.into_iter().collect();

    let configured: Vec<&str> = keyring.iter().flat_map(Keyring::key_ids).collect();
    let ids: BTreeSet<&str> = configured
        .iter()
        .copied()
        .chain(in_use.iter().map(|k| k.key_id.as_str()))
        .chain(checked.keys().map(String::as_str))
        .collect();
    let keys: Vec<KeyStatus> = ids
        .into_iter()
        .map(|id| {
            let here = match configured.iter().position(|k| *k == id) {
                Some(0) => Here::Active,
                Some(_) => Here::Configured,
                None => Here::Missing,
            };
            let check = match (&keyring, checked.get(id)) {
                _ if here == Here::Missing => Check::None,
                (Some(keyring), Some(value)) if opens_check_value(keyring, id, value) => Check::Ok,
                (Some(_), Some(_)) => Check::WrongKey,
                _ => Check::NotRecorded,
            };
            let live = in_use.iter().find(|k| k.key_id == id);
            KeyStatus {
                key_id: id.to_owned(),
                here,
                check,
                live_workflows: live.map_or(0, |k| k.workflows),
                oldest_value: live.map(|k| k.oldest.to_rfc3339()),
            }
        })
        .collect();

    match format {
        OutputFormat::Json => println!("{}", serde_json::to_string_pretty(&keys)?),
        OutputFormat::Text => print_table(&keys),
    }
    let wrong: Vec<&str> = keys
        .iter()
        .filter(|k| k.check == Check::WrongKey)
        .map(|k| k.key_id.as_str())
        .collect();
    if !wrong.is_empty() {
        bail!(
            "this configuration's key for {} is not the key that id sealed with",
            wrong.join(", ")
        );
    }
    let needed: Vec<String> = keys
        .iter()
        .filter(|k| k.live_workflows > 0 && k.here == Here::Missing)
        .map(|k| {
            format!(
                "{} (live workflows holding its values: {})",
                k.key_id, k.live_workflows
            )
        })
        .collect();
    if !needed.is_empty() {
        bail!(
            "live workflows hold values sealed with keys this configuration lacks: {}",
            needed.join(", ")
        );
    }
    Ok(())
}

/// An enum's name as JSON shows it (`wrong_key`), written with spaces (`wrong key`).
fn word(value: impl Serialize) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(|s| s.replace('_', " ")))
        .unwrap_or_default()
}

fn print_table(keys: &[KeyStatus]) {
    println!(
        "{:<16} {:<10} {:<12} {:>14}  OLDEST LIVE VALUE",
        "KEY", "HERE", "CHECK", "LIVE WORKFLOWS"
    );
    for key in keys {
        println!(
            "{:<16} {:<10} {:<12} {:>14}  {}",
            key.key_id,
            word(key.here),
            word(key.check),
            key.live_workflows,
            key.oldest_value.as_deref().unwrap_or("-")
        );
    }
}
