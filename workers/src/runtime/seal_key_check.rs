//! The start-up self-check of the seal keys: each configured key must open the known
//! value that key's id sealed the first time any process ran with it. A key pasted
//! wrong under a known id stops the process here, before it seals anything no other
//! process can open or fails every create that meets the real key's values.

use anyhow::bail;
use hcpflow_engine::{Binding, Keyring, Sealed, WorkflowId};
use hcpflow_eventstore::EventStore;

/// What the check value is sealed for. Nothing else is ever sealed for this purpose, so
/// the value opens nowhere but here (a workflow of this id gains nothing from it).
const CHECK_OWNER: &str = "hcpflow-seal-key-check";
const CHECK_PURPOSE: &str = "seal-key-check";
const CHECK_TEXT: &str = "hcpflow seal key check";

/// Opens (or, for a key id seen for the first time, records) each key's check value.
///
/// # Errors
/// A configured key that does not open its id's recorded value, naming the key id.
pub async fn check_seal_keys(store: &EventStore, keyring: &Keyring) -> anyhow::Result<()> {
    let owner = WorkflowId::new(CHECK_OWNER)?;
    let binding = Binding::new(&owner, CHECK_PURPOSE);
    for key_id in keyring.key_ids() {
        let offered = keyring
            .seal_with_key(key_id, &CHECK_TEXT.to_owned(), &binding)?
            .to_wire();
        let recorded = store.seal_key_check(key_id, &offered).await?;
        if !opens_check_value(keyring, key_id, &recorded) {
            bail!(
                "seal key {key_id:?} is not the key that id stood for before: it does not open the value that key sealed when first used (the id is right, the key bytes are not; values sealed with the real key would not open)"
            );
        }
    }
    Ok(())
}

/// Whether `keyring`'s key `key_id` opens `recorded`, the check value of that id: sealed
/// with that very id (not another the row happens to hold) and for the check's binding.
pub(crate) fn opens_check_value(keyring: &Keyring, key_id: &str, recorded: &str) -> bool {
    let Ok(owner) = WorkflowId::new(CHECK_OWNER) else {
        return false;
    };
    Sealed::<String>::from_wire(recorded)
        .ok()
        .filter(|sealed| sealed.key_id() == key_id)
        .and_then(|sealed| {
            keyring
                .open(&sealed, &Binding::new(&owner, CHECK_PURPOSE))
                .ok()
        })
        .as_deref()
        == Some(CHECK_TEXT)
}
