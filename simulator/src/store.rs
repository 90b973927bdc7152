//! Persistence of the fleet in the state dir: `DIR/fleet.json`, written atomically (temp file,
//! fsync, rename) so a killed simulator never leaves half a file. Desired-state changes are
//! written at once; frequent reports (status, inventory, events) are written by a debounced
//! background writer.

use std::path::{Path, PathBuf};

use crate::error::SimError;
use crate::model::FleetData;

/// File name of the fleet state in the state dir.
pub const FLEET_FILE: &str = "fleet.json";

/// The fleet file of one state dir.
#[derive(Debug, Clone)]
pub struct Store {
    path: PathBuf,
}

impl Store {
    /// The store in `dir` (created if missing).
    pub fn open(dir: &Path) -> Result<Self, SimError> {
        std::fs::create_dir_all(dir).map_err(|e| SimError::io("create", dir, e))?;
        Ok(Self {
            path: dir.join(FLEET_FILE),
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Loads the fleet; a missing file is an empty fleet.
    pub fn load(&self) -> Result<FleetData, SimError> {
        match std::fs::read(&self.path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| SimError::Parse {
                path: self.path.clone(),
                message: e.to_string(),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(FleetData {
                version: 1,
                ..FleetData::default()
            }),
            Err(e) => Err(SimError::io("read", &self.path, e)),
        }
    }

    /// Writes the fleet atomically.
    pub fn save(&self, data: &FleetData) -> Result<(), SimError> {
        let json = serde_json::to_vec_pretty(data).map_err(|e| SimError::Parse {
            path: self.path.clone(),
            message: e.to_string(),
        })?;
        crate::tls::write_file(&self.path, &json, 0o600)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use odac_protocol::{AppSpec, EventLevel};

    #[test]
    fn round_trips_and_missing_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        assert!(store.load().unwrap().apps.is_empty());
        let mut data = FleetData::default();
        data.apps.insert(
            "web".into(),
            crate::model::AppRecord {
                host: "h1".into(),
                spec: AppSpec::new("web", "busybox"),
                created_ms: 1,
                updated_ms: 2,
                last_restart_request: None,
            },
        );
        data.push_event(
            EventLevel::Info,
            "control_plane",
            None,
            Some("web"),
            "created",
        );
        store.save(&data).unwrap();
        assert_eq!(store.load().unwrap(), data);
        std::fs::write(store.path(), b"{broken").unwrap();
        let err = store.load().unwrap_err().to_string();
        assert!(err.contains("fleet.json"), "{err}");
    }
}
