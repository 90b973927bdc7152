//! Change detection: a stable hash of the wire inventory (SHA-256 over its JSON, whose maps
//! are ordered and whose lists are sorted), so a rescan every few seconds can tell whether
//! anything worth re-sending changed.

use odac_protocol::Inventory;
use sha2::{Digest, Sha256};

/// Hex SHA-256 of the inventory's canonical JSON.
pub fn inventory_hash(inventory: &Inventory) -> String {
    // Serialising plain structs, BTreeMaps and strings cannot fail; an empty hash input on
    // the impossible error still yields a stable value.
    let bytes = serde_json::to_vec(inventory).unwrap_or_default();
    hex::encode(Sha256::digest(&bytes))
}

/// Remembers the last inventory hash and says whether a new inventory differs.
#[derive(Debug, Clone, Default)]
pub struct ChangeDetector {
    last: Option<String>,
}

impl ChangeDetector {
    pub fn new() -> Self {
        Self::default()
    }

    /// Record this inventory; true when it differs from the previous one (or is the first).
    pub fn observe(&mut self, inventory: &Inventory) -> bool {
        let hash = inventory_hash(inventory);
        let changed = self.last.as_deref() != Some(hash.as_str());
        self.last = Some(hash);
        changed
    }

    /// The hash of the last observed inventory.
    pub fn last_hash(&self) -> Option<&str> {
        self.last.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_inventory_same_hash_and_change_is_seen() {
        let mut inv = Inventory::default();
        let mut det = ChangeDetector::new();
        assert!(det.observe(&inv));
        assert!(!det.observe(&inv.clone()));
        let before = inventory_hash(&inv);
        inv.host.cpus = 64;
        assert_ne!(inventory_hash(&inv), before);
        assert!(det.observe(&inv));
        assert_eq!(det.last_hash(), Some(inventory_hash(&inv).as_str()));
    }
}
