//! `update/current.json` under the state dir: the one record of a staged version, like
//! systemd's boot counting. The launcher reads it before anything else starts, counts an
//! attempt before it executes a pending version, and marks the version failed when a pending
//! one is found with its attempts spent; the running version commits it. Written atomically
//! (mode 0600); an unreadable record is treated as none (the packaged binary runs).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Directory of the update state under the state dir.
pub const UPDATE_DIR: &str = "update";
/// The record's file name.
pub const CURRENT_FILE: &str = "current.json";
/// Most failed versions remembered (never retried until a newer one is offered).
pub const MAX_FAILED: usize = 16;

/// Where a staged version stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UpdateState {
    /// Started (or about to be) and not yet committed.
    Pending,
    /// Proved itself: connected and reconciled within the commit window.
    Committed,
    /// Did not commit; the previous version runs.
    Failed,
    /// A packaged binary at least as new was installed (apt); it runs.
    Superseded,
}

/// A version on disk: its number and its binary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Slot {
    pub version: String,
    pub path: PathBuf,
}

/// The record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CurrentUpdate {
    /// The staged version.
    pub slot: Slot,
    pub state: UpdateState,
    /// Starts of the pending version so far (counted before each exec).
    #[serde(default)]
    pub attempts: u32,
    /// How far the pending version got (`started`, `ready`, `connected`), for the cause.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<String>,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
    /// The version rolled back to (`None`: the packaged binary).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous: Option<Slot>,
    /// Versions that failed, newest last: never installed again.
    #[serde(default)]
    pub failed: Vec<String>,
}

/// The update directory under `state_dir`.
pub fn update_dir(state_dir: &Path) -> PathBuf {
    state_dir.join(UPDATE_DIR)
}

/// The record's path under `state_dir`.
pub fn current_path(state_dir: &Path) -> PathBuf {
    update_dir(state_dir).join(CURRENT_FILE)
}

/// Reads the record; absent or unreadable is `None` (the packaged binary runs), with the
/// reason for an unreadable one.
pub fn load(state_dir: &Path) -> Result<Option<CurrentUpdate>, String> {
    let path = current_path(state_dir);
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| format!("{}: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// Writes the record atomically (mode 0600).
pub fn save(state_dir: &Path, record: &CurrentUpdate) -> std::io::Result<()> {
    odac_host::atomic_file::create_dir(&update_dir(state_dir), 0o700)?;
    let bytes = serde_json::to_vec_pretty(record).map_err(std::io::Error::other)?;
    odac_host::atomic_file::write_atomic(&current_path(state_dir), &bytes, 0o600)
}

impl CurrentUpdate {
    /// A freshly staged version, to be started next.
    pub fn staged(slot: Slot, previous: Option<Slot>, failed: Vec<String>) -> Self {
        Self {
            slot,
            state: UpdateState::Pending,
            attempts: 0,
            progress: None,
            cause: None,
            previous,
            failed,
        }
    }

    /// The version that runs when this record is honoured (`None`: the packaged binary).
    pub fn active(&self) -> Option<&Slot> {
        match self.state {
            UpdateState::Pending | UpdateState::Committed => Some(&self.slot),
            UpdateState::Failed => self.previous.as_ref(),
            UpdateState::Superseded => None,
        }
    }

    /// Marks the staged version failed with `cause`, and remembers it.
    pub fn fail(&mut self, cause: String) {
        self.state = UpdateState::Failed;
        self.cause = Some(cause);
        if !self.failed.contains(&self.slot.version) {
            self.failed.push(self.slot.version.clone());
        }
        let extra = self.failed.len().saturating_sub(MAX_FAILED);
        self.failed.drain(..extra);
    }

    /// Whether `version` failed before.
    pub fn has_failed(&self, version: &str) -> bool {
        self.failed.iter().any(|v| v == version)
    }
}
