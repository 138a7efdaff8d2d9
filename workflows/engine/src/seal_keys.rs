//! The seal keys a process uses now: one [`Keyring`], replaced whole when the key files
//! change. Every use takes the current keyring for its whole operation, so a value is
//! sealed or opened with one consistent set of keys even while a reload happens.

use std::sync::{Arc, RwLock};

use crate::sealed::Keyring;

#[derive(Debug)]
pub struct SealKeys {
    current: RwLock<Arc<Keyring>>,
}

impl SealKeys {
    pub fn new(keyring: Keyring) -> Self {
        Self {
            current: RwLock::new(Arc::new(keyring)),
        }
    }

    /// The keyring in force.
    pub fn current(&self) -> Arc<Keyring> {
        // A poisoned lock still holds a whole keyring: replacing is one assignment.
        self.current
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Puts `keyring` in force for every later use.
    pub fn replace(&self, keyring: Keyring) {
        *self
            .current
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(keyring);
    }
}

impl From<Keyring> for SealKeys {
    fn from(keyring: Keyring) -> Self {
        Self::new(keyring)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Binding, WorkflowId};

    fn ring(spec_byte: u8, id: &str) -> Keyring {
        use base64::Engine as _;
        let key = base64::engine::general_purpose::STANDARD.encode([spec_byte; 32]);
        Keyring::parse(&format!("{id}:{key}")).unwrap()
    }

    #[test]
    fn a_replaced_keyring_is_used_from_then_on_and_a_taken_one_stays_whole() {
        let keys = SealKeys::new(ring(1, "old"));
        let taken = keys.current();
        keys.replace(ring(2, "new"));
        assert_eq!(taken.active_key_id(), "old");
        assert_eq!(keys.current().active_key_id(), "new");
        let id = WorkflowId::new("w").unwrap();
        let sealed = keys
            .current()
            .seal(&"x".to_owned(), &Binding::new(&id, "p"))
            .unwrap();
        assert_eq!(sealed.key_id(), "new");
    }
}
