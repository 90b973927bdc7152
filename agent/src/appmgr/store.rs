//! Durable state in the state directory: `desired.json` (the desired state as last accepted)
//! and `statuses.json` (the last statuses, for `odac-agent status`). Writes are atomic: a temp
//! file in the same directory, fsync, rename over the target, fsync the directory, so a crash
//! leaves either the old or the new file, never half of one. A file that does not parse is
//! renamed aside (`desired.json.corrupt-<unix seconds>`) and reported; the agent goes on.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use odac_protocol::{AppStatus, DesiredState};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::error::StoreError;

/// File name of the desired state.
pub const DESIRED_FILE: &str = "desired.json";
/// File name of the statuses.
pub const STATUSES_FILE: &str = "statuses.json";

/// The state directory.
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    }
}

impl Store {
    /// Open (and create) the state directory.
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        fs::create_dir_all(dir).map_err(io(dir))?;
        Ok(Self {
            dir: dir.to_path_buf(),
        })
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Load the desired state: `Ok(None)` when there is none yet; a corrupt file is moved
    /// aside and reported as [`StoreError::Corrupt`].
    pub fn load_desired(&self) -> Result<Option<DesiredState>, StoreError> {
        let path = self.dir.join(DESIRED_FILE);
        let loaded: Option<DesiredState> = self.load(&path)?;
        if let Some(state) = &loaded
            && let Err(e) = state.validate()
        {
            return Err(self.move_aside(&path, format!("does not validate: {e}"))?);
        }
        Ok(loaded)
    }

    /// Persist the desired state atomically.
    pub fn save_desired(&self, state: &DesiredState) -> Result<(), StoreError> {
        write_atomic(&self.dir.join(DESIRED_FILE), state)
    }

    /// Persist the statuses atomically.
    pub fn save_statuses(&self, statuses: &[AppStatus]) -> Result<(), StoreError> {
        write_atomic(&self.dir.join(STATUSES_FILE), &statuses)
    }

    /// The statuses last saved (empty when none were).
    pub fn load_statuses(&self) -> Result<Vec<AppStatus>, StoreError> {
        let path = self.dir.join(STATUSES_FILE);
        Ok(self.load(&path)?.unwrap_or_default())
    }

    fn load<T: DeserializeOwned>(&self, path: &Path) -> Result<Option<T>, StoreError> {
        let bytes = match fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io(path)(e)),
        };
        match serde_json::from_slice(&bytes) {
            Ok(v) => Ok(Some(v)),
            Err(e) => Err(self.move_aside(path, format!("not valid json: {e}"))?),
        }
    }

    /// Rename a bad file aside; returns the error to report.
    fn move_aside(&self, path: &Path, problem: String) -> Result<StoreError, StoreError> {
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or_default();
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let moved_to = self.dir.join(format!("{name}.corrupt-{secs}"));
        fs::rename(path, &moved_to).map_err(io(path))?;
        Ok(StoreError::Corrupt {
            path: path.to_path_buf(),
            moved_to,
            problem,
        })
    }
}

/// Write `value` as JSON to `path` atomically: temp file, fsync, rename, fsync directory.
pub fn write_atomic<T: Serialize + ?Sized>(path: &Path, value: &T) -> Result<(), StoreError> {
    let mut bytes = serde_json::to_vec_pretty(value).map_err(|source| StoreError::Encode {
        path: path.to_path_buf(),
        source,
    })?;
    bytes.push(b'\n');
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)
            .map_err(io(&tmp))?;
        file.write_all(&bytes).map_err(io(&tmp))?;
        file.sync_all().map_err(io(&tmp))?;
        drop(file);
        fs::rename(&tmp, path).map_err(io(path))?;
        File::open(dir).and_then(|d| d.sync_all()).map_err(io(dir))
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use odac_protocol::AppSpec;

    #[test]
    fn round_trip_and_corrupt_files_are_moved_aside() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("state")).unwrap();
        assert_eq!(store.load_desired().unwrap(), None);
        let state = DesiredState {
            generation: 7,
            apps: vec![AppSpec::new("web", "busybox")],
        };
        store.save_desired(&state).unwrap();
        assert_eq!(store.load_desired().unwrap(), Some(state));
        let leftovers: Vec<_> = fs::read_dir(store.dir())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(
            leftovers,
            vec![DESIRED_FILE.to_owned()],
            "no temp file left"
        );

        fs::write(
            store.dir().join(DESIRED_FILE),
            b"{\"generation\": 3, \"apps\": [",
        )
        .unwrap();
        let err = store.load_desired().unwrap_err();
        let StoreError::Corrupt { moved_to, .. } = &err else {
            unreachable!("{err}")
        };
        assert!(moved_to.exists());
        assert!(err.to_string().contains("desired.json is corrupt"), "{err}");
        assert_eq!(store.load_desired().unwrap(), None, "the bad file is gone");

        fs::write(
            store.dir().join(DESIRED_FILE),
            br#"{"generation":1,"apps":[{"name":"Bad Name","image":"x"}]}"#,
        )
        .unwrap();
        assert!(matches!(
            store.load_desired(),
            Err(StoreError::Corrupt { .. })
        ));
    }
}
