//! Durable state in the state directory: `desired.json` (the desired state as last accepted)
//! and `statuses.json` (the last statuses, for `odac-agent status`). Writes are atomic: a temp
//! file in the same directory, fsync, rename over the target, fsync the directory, so a crash
//! leaves either the old or the new file, never half of one. A file that does not parse is
//! renamed aside (`desired.json.corrupt-<unix seconds>`) and reported; the agent goes on. So is
//! anything that is not a regular file (a directory, a FIFO: read without blocking through
//! [`bounded_read`](crate::bounded_read)) or a file over [`MAX_STATE_FILE`].

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use odac_protocol::{AppStatus, DesiredState};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::appmgr::error::StoreError;

/// File name of the desired state.
pub const DESIRED_FILE: &str = "desired.json";
/// File name of the statuses.
pub const STATUSES_FILE: &str = "statuses.json";

/// The largest state file read (a full desired state is a few MiB at most).
pub const MAX_STATE_FILE: u64 = 64 * 1024 * 1024;

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
    /// Open (and create) the state directory, mode 0700: its files hold env values and git
    /// secrets.
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        private_dir(dir).map_err(io(dir))?;
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
        off_the_executor(|| write_atomic(&self.dir.join(DESIRED_FILE), state))
    }

    /// Persist the statuses atomically.
    pub fn save_statuses(&self, statuses: &[AppStatus]) -> Result<(), StoreError> {
        off_the_executor(|| write_atomic(&self.dir.join(STATUSES_FILE), &statuses))
    }

    /// The statuses last saved (empty when none were).
    pub fn load_statuses(&self) -> Result<Vec<AppStatus>, StoreError> {
        let path = self.dir.join(STATUSES_FILE);
        Ok(self.load(&path)?.unwrap_or_default())
    }

    fn load<T: DeserializeOwned>(&self, path: &Path) -> Result<Option<T>, StoreError> {
        use crate::bounded_read::{BoundedReadError, read_regular};
        let bytes = match read_regular(path, MAX_STATE_FILE) {
            Ok(b) => b,
            Err(BoundedReadError::NotFound(_)) => return Ok(None),
            Err(e @ (BoundedReadError::NotRegular { .. } | BoundedReadError::TooLarge { .. })) => {
                return Err(self.move_aside(path, e.to_string())?);
            }
            Err(BoundedReadError::Io(e)) => return Err(io(path)(e)),
        };
        // decoded as the control plane's frames are: one decoder per type in the binary
        match odac_protocol::decode_document(&bytes) {
            Ok(v) => Ok(Some(v)),
            Err(e) => Err(self.move_aside(path, format!("not valid json: {}", e.reply_text()))?),
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
        // a second bad file within the same second gets a name of its own
        let mut moved_to = self.dir.join(format!("{name}.corrupt-{secs}"));
        let mut n = 1;
        while fs::symlink_metadata(&moved_to).is_ok() && n < 100 {
            moved_to = self.dir.join(format!("{name}.corrupt-{secs}-{n}"));
            n += 1;
        }
        fs::rename(path, &moved_to).map_err(io(path))?;
        Ok(StoreError::Corrupt {
            path: path.to_path_buf(),
            moved_to,
            problem,
        })
    }
}

/// Runs blocking file IO (the fsyncs of a save: milliseconds here, seconds on a busy SD card)
/// so that a slow disk stalls only its caller: on the agent's multi-thread runtime the worker
/// first hands its other tasks (the uplink's heartbeat, the inventory loop) to another thread;
/// on a current-thread runtime (`apply`, `status`, most tests) or outside one it just runs `f`.
pub(crate) fn off_the_executor<R>(f: impl FnOnce() -> R) -> R {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

/// Create `dir` (and its missing parents) and make it mode 0700, readable by its owner only.
pub fn private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
}

/// Write `value` as JSON to `path` atomically ([`odac_host::atomic_file`]: temp file, fsync,
/// rename, fsync directory). The file is mode 0600 (state files hold env values and git secrets).
pub fn write_atomic<T: Serialize + ?Sized>(path: &Path, value: &T) -> Result<(), StoreError> {
    write_atomic_bytes(path, &state_json(path, value)?)
}

/// `value` as the JSON a state file at `path` holds (pretty, a final newline).
pub fn state_json<T: Serialize + ?Sized>(path: &Path, value: &T) -> Result<Vec<u8>, StoreError> {
    let mut bytes = serde_json::to_vec_pretty(value).map_err(|source| StoreError::Encode {
        path: path.to_path_buf(),
        source,
    })?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// Write `bytes` (from [`state_json`]) to `path` as [`write_atomic`] does.
pub fn write_atomic_bytes(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    odac_host::atomic_file::write_atomic(path, bytes, 0o600).map_err(io(path))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]
    use super::*;
    use odac_protocol::AppSpec;

    #[test]
    fn state_files_are_private() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("state");
        fs::create_dir(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
        let store = Store::open(&dir).unwrap();
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700, "an existing state dir is made private");
        fs::write(dir.join(DESIRED_FILE), "{}").unwrap();
        fs::set_permissions(dir.join(DESIRED_FILE), fs::Permissions::from_mode(0o644)).unwrap();
        let mut app = AppSpec::new("web", "busybox");
        app.env.insert("API_KEY".into(), "s3cret".into());
        store
            .save_desired(&DesiredState {
                generation: 1,
                apps: vec![app],
            })
            .unwrap();
        store.save_statuses(&[]).unwrap();
        assert_eq!(mode(&dir.join(DESIRED_FILE)), 0o600);
        assert_eq!(mode(&dir.join(STATUSES_FILE)), 0o600);
        let fresh = tmp.path().join("a/b");
        Store::open(&fresh).unwrap();
        assert_eq!(mode(&fresh), 0o700);
    }

    #[test]
    fn a_directory_or_fifo_at_desired_json_is_moved_aside_and_heals() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::open(tmp.path()).unwrap();
        let path = tmp.path().join(DESIRED_FILE);
        fs::create_dir(&path).unwrap();
        fs::write(path.join("inside"), "x").unwrap();
        let e = store.load_desired().unwrap_err();
        let StoreError::Corrupt {
            moved_to, problem, ..
        } = e
        else {
            panic!("{e:?}");
        };
        assert_eq!(problem, "is a directory, not a regular file");
        assert!(moved_to.join("inside").exists(), "moved, not removed");
        assert!(store.load_desired().unwrap().is_none(), "healed");
        let status = std::process::Command::new("mkfifo")
            .arg(&path)
            .status()
            .unwrap();
        assert!(status.success());
        // the old read blocked here for ever: a FIFO's open waits for a writer
        let e = store.load_desired().unwrap_err().to_string();
        assert!(e.contains("is a fifo"), "{e}");
        assert!(store.load_desired().unwrap().is_none());
    }

    /// Ticks a task every 10 ms on a one-worker multi-thread runtime while `blocking` runs on
    /// that worker for 300 ms; returns how many ticks happened meanwhile.
    fn ticks_during(blocking: fn()) -> u32 {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let ticks = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
            let counter = ticks.clone();
            let ticker = tokio::spawn(async move {
                loop {
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                    counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
            });
            // let the ticker start on the worker
            tokio::time::sleep(std::time::Duration::from_millis(30)).await;
            let before = ticks.load(std::sync::atomic::Ordering::SeqCst);
            tokio::spawn(async move { blocking() }).await.unwrap();
            let during = ticks.load(std::sync::atomic::Ordering::SeqCst) - before;
            ticker.abort();
            during
        })
    }

    #[test]
    fn a_slow_write_does_not_stall_the_other_tasks_of_its_worker() {
        fn slow_plain() {
            std::thread::sleep(std::time::Duration::from_millis(300));
        }
        fn slow_off() {
            off_the_executor(|| std::thread::sleep(std::time::Duration::from_millis(300)));
        }
        let stalled = ticks_during(slow_plain);
        let kept = ticks_during(slow_off);
        assert!(
            stalled <= 2,
            "the baseline really blocks its worker: {stalled} ticks"
        );
        assert!(
            kept >= 5,
            "other tasks ran meanwhile: {kept} ticks in 300 ms"
        );
    }

    #[test]
    fn saves_work_on_both_runtime_flavors_and_outside_one() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let state = DesiredState {
            generation: 1,
            apps: vec![AppSpec::new("web", "busybox")],
        };
        store.save_desired(&state).unwrap();
        for mut builder in [
            tokio::runtime::Builder::new_current_thread(),
            tokio::runtime::Builder::new_multi_thread(),
        ] {
            let rt = builder.enable_all().build().unwrap();
            let s = store.clone();
            let st = state.clone();
            rt.block_on(async move {
                tokio::spawn(async move {
                    s.save_desired(&st).unwrap();
                    s.save_statuses(&[]).unwrap();
                })
                .await
                .unwrap();
            });
        }
        assert_eq!(store.load_desired().unwrap(), Some(state));
        assert_eq!(store.load_statuses().unwrap(), Vec::<AppStatus>::new());
    }

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
