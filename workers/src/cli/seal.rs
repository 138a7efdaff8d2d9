//! `hcpflow seal status`: the seal keys as the database knows them — which key ids the
//! live workflows' histories still hold sealed values of, and whether this
//! configuration has each (and has the right bytes for it, by the start-up check's
//! value). The gate of a rotation's last step: an old key may go when no live workflow
//! needs it. Read-only.

use std::collections::BTreeSet;

use anyhow::{bail, Context};
use hcpflow_engine::{Binding, Keyring, Sealed, WorkflowId};
use hcpflow_eventstore::EventStore;
use serde::Serialize;

use crate::cli::cluster::OutputFormat;
use crate::cli::config::Config;
use crate::runtime::seal_key_check::{CHECK_OWNER, CHECK_PURPOSE, CHECK_TEXT};

/// One key id, as configured here and as the database knows it.
#[derive(Debug, Serialize)]
struct KeyStatus {
    key_id: String,
    /// `active` (seals), `configured` (opens), or `missing`.
    here: &'static str,
    /// Whether this configuration's key opens the value the key id sealed when first
    /// used: `ok`, `wrong key`, `not recorded` (never used by a server), or `-`.
    check: &'static str,
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
    let checked = store.checked_seal_keys().await?;
    let owner = WorkflowId::new(CHECK_OWNER)?;
    let binding = Binding::new(&owner, CHECK_PURPOSE);

    let configured: Vec<&str> = keyring.iter().flat_map(Keyring::key_ids).collect();
    let ids: BTreeSet<&str> = configured
        .iter()
        .copied()
        .chain(in_use.iter().map(|k| k.key_id.as_str()))
        .chain(checked.iter().map(|(id, _)| id.as_str()))
        .collect();
    let mut keys = Vec::new();
    for id in ids {
        let here = match configured.iter().position(|k| *k == id) {
            Some(0) => "active",
            Some(_) => "configured",
            None => "missing",
        };
        let recorded = store.checked_seal_key_value(id).await?;
        let check = match (&keyring, recorded, here) {
            (_, _, "missing") | (None, _, _) => "-",
            (_, None, _) => "not recorded",
            (Some(keyring), Some(value), _) => {
                let opened = Sealed::<String>::from_wire(&value)
                    .and_then(|sealed| keyring.open(&sealed, &binding));
                if opened.as_deref() == Ok(CHECK_TEXT) {
                    "ok"
                } else {
                    "wrong key"
                }
            }
        };
        let live = in_use.iter().find(|k| k.key_id == id);
        keys.push(KeyStatus {
            key_id: id.to_owned(),
            here,
            check,
            live_workflows: live.map_or(0, |k| k.workflows),
            oldest_value: live.map(|k| k.oldest.to_rfc3339()),
        });
    }

    match format {
        OutputFormat::Json => println!("{}", serde_json::to_string_pretty(&keys)?),
        OutputFormat::Text => {
            println!(
                "{:<16} {:<10} {:<12} {:>14}  OLDEST LIVE VALUE",
                "KEY", "HERE", "CHECK", "LIVE WORKFLOWS"
            );
            for key in &keys {
                println!(
                    "{:<16} {:<10} {:<12} {:>14}  {}",
                    key.key_id,
                    key.here,
                    key.check,
                    key.live_workflows,
                    key.oldest_value.as_deref().unwrap_or("-")
                );
            }
        }
    }
    let needed: Vec<String> = keys
        .iter()
        .filter(|k| k.live_workflows > 0 && k.here == "missing")
        .map(|k| {
            format!(
                "{} (live workflows holding its values: {})",
                k.key_id, k.live_workflows
            )
        })
        .collect();
    let wrong: Vec<&str> = keys
        .iter()
        .filter(|k| k.check == "wrong key")
        .map(|k| k.key_id.as_str())
        .collect();
    if !wrong.is_empty() {
        bail!(
            "this configuration's key for {} is not the key that id sealed with",
            wrong.join(", ")
        );
    }
    if !needed.is_empty() {
        bail!(
            "live workflows hold values sealed with keys this configuration lacks: {}",
            needed.join(", ")
        );
    }
    Ok(())
}
