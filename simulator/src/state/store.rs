//! Persistence of the fleet in the state dir: `DIR/fleet.json`, written atomically (temp file,
//! fsync, rename) so a killed simulator never leaves half a file. Desired-state changes are
//! written at once; frequent reports (status, inventory, events) are written by a debounced
//! background writer. Git secrets are sealed on the way out and opened on the way in
//! (`secrets.rs`): the file never holds one in clear.

use std::path::{Path, PathBuf};

use crate::error::SimError;
use crate::state::model::FleetData;
use crate::state::secrets::Sealer;

/// File name of the fleet state in the state dir.
pub const FLEET_FILE: &str = "fleet.json";

/// The fleet file of one state dir.
#[derive(Debug, Clone)]
pub struct Store {
    path: PathBuf,
    sealer: Sealer,
}

impl Store {
    /// The store in `dir` (created if missing).
    pub fn open(dir: &Path) -> Result<Self, SimError> {
        std::fs::create_dir_all(dir).map_err(|e| SimError::io("create", dir, e))?;
        Ok(Self {
            path: dir.join(FLEET_FILE),
            sealer: Sealer::load_or_create(dir)?,
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Loads the fleet; a missing file is an empty fleet. A sealed secret that does not open
    /// (the key file was replaced) is dropped with an error event naming the app.
    pub fn load(&self) -> Result<FleetData, SimError> {
        match std::fs::read(&self.path) {
            Ok(bytes) => {
                let mut data: FleetData =
                    serde_json::from_slice(&bytes).map_err(|e| SimError::Parse {
                        path: self.path.clone(),
                        message: e.to_string(),
                    })?;
                self.unseal(&mut data);
                Ok(data)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(FleetData {
                version: 1,
                ..FleetData::default()
            }),
            Err(e) => Err(SimError::io("read", &self.path, e)),
        }
    }

    fn unseal(&self, data: &mut FleetData) {
        let mut lost = Vec::new();
        for (name, app) in &mut data.apps {
            let Some(sealed) = app.sealed_secret.take() else {
                continue;
            };
            let opened = self.sealer.open(name, &sealed);
            match (opened, app.spec.source.as_mut()) {
                (Some(secret), Some(source)) => {
                    source.secret = Some(odac_protocol::GitSecret::new(secret));
                }
                _ => lost.push(name.clone()),
            }
        }
        for name in lost {
            let msg = format!(
                "app {name}: its git secret could not be unsealed with {}; set the app's source secret again",
                self.sealer.path().display()
            );
            tracing::error!("{msg}");
            data.push_event(
                odac_protocol::EventLevel::Error,
                "control_plane",
                None,
                Some(&name),
                msg,
            );
        }
    }

    /// `data` as written: every git secret moved out of its spec and sealed.
    fn sealed(&self, data: &FleetData) -> Result<FleetData, SimError> {
        let mut out = data.clone();
        for (name, app) in &mut out.apps {
            app.sealed_secret = None;
            if let Some(secret) = app.spec.source.as_mut().and_then(|s| s.secret.take()) {
                app.sealed_secret = Some(self.sealer.seal(name, secret.expose())?);
            }
        }
        Ok(out)
    }

    /// Writes the fleet atomically, git secrets sealed.
    pub fn save(&self, data: &FleetData) -> Result<(), SimError> {
        let data = &self.sealed(data)?;
        let json = serde_json::to_vec_pretty(data).map_err(|e| SimError::Parse {
            path: self.path.clone(),
            message: e.to_string(),
        })?;
        crate::server::tls::write_file(&self.path, &json, 0o600)
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
            crate::state::model::AppRecord {
                host: "h1".into(),
                spec: AppSpec::new("web", "busybox"),
                created_ms: 1,
                updated_ms: 2,
                last_restart_request: None,
                sealed_secret: None,
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
        // a git secret is sealed in the file and back in the spec after loading
        let mut spec = AppSpec::new("private", "busybox");
        spec.image = None;
        spec.source = Some(odac_protocol::GitSource {
            url: "https://git.example/o/r.git".into(),
            secret: Some(odac_protocol::GitSecret::new("ghp_in_clear_never")),
            ..odac_protocol::GitSource::default()
        });
        data.apps.insert(
            "private".into(),
            crate::state::model::AppRecord {
                host: "h1".into(),
                spec,
                ..crate::state::model::AppRecord::default()
            },
        );
        store.save(&data).unwrap();
        let text = std::fs::read_to_string(store.path()).unwrap();
        assert!(!text.contains("ghp_in_clear_never"), "{text}");
        assert!(text.contains("\"sealed_secret\": \"v1:"), "{text}");
        assert_eq!(store.load().unwrap(), data);
        // another key cannot open it: the secret is dropped and the app named in an event
        std::fs::remove_file(dir.path().join(crate::state::secrets::KEY_FILE)).unwrap();
        let other = Store::open(dir.path()).unwrap();
        let loaded = other.load().unwrap();
        let source = loaded.apps["private"].spec.source.clone().unwrap();
        assert_eq!(source.secret, None);
        assert!(
            loaded
                .events
                .iter()
                .any(|e| e.app.as_deref() == Some("private")
                    && e.message.contains("could not be unsealed")),
            "{:?}",
            loaded.events
        );
        std::fs::write(store.path(), b"{broken").unwrap();
        let err = store.load().unwrap_err().to_string();
        assert!(err.contains("fleet.json"), "{err}");
    }
}
