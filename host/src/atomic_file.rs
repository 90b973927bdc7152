//! The one way the agent (and the simulator) replaces a file: written to a temporary sibling
//! created with its final mode (a secret is never readable by others, not even for a moment),
//! synced, renamed over the target, and the directory synced so the rename itself survives a
//! power cut. A crash leaves either the old file or the new one, never half of one.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// A temporary sibling of `target`, created (mode `mode`) before the work that fills it, and
/// removed on drop unless [`Staged::commit`] renamed it into place.
pub struct Staged {
    tmp: PathBuf,
    target: PathBuf,
    file: Option<File>,
}

impl Staged {
    /// Creates `dir/.name.tmp-PID` with `mode`; fails early when `dir` is not writable.
    pub fn create(target: &Path, mode: u32) -> std::io::Result<Self> {
        let dir = target.parent().unwrap_or_else(|| Path::new("."));
        let name = target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
        // a stale sibling (a crash of a process with this pid) is removed, never opened: the
        // new one is created exclusively, so a symlink planted at its name is not followed
        match fs::remove_file(&tmp) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)?;
        // the umask may have cleared bits of `mode`
        file.set_permissions(fs::Permissions::from_mode(mode))?;
        Ok(Self {
            tmp,
            target: target.to_owned(),
            file: Some(file),
        })
    }

    /// Writes `contents`, syncs, and renames the file over the target.
    pub fn commit(mut self, contents: &[u8]) -> std::io::Result<()> {
        if let Some(mut file) = self.file.take() {
            file.write_all(contents)?;
            file.sync_all()?;
        }
        fs::rename(&self.tmp, &self.target)?;
        self.tmp = PathBuf::new();
        // the rename is durable only once the directory entry is
        let dir = match self.target.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        File::open(dir)?.sync_all()
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.tmp.as_os_str().is_empty() {
            let _ = fs::remove_file(&self.tmp);
        }
    }
}

/// Creates `dir` (and parents) with `mode` for the directories it creates.
pub fn create_dir(dir: &Path, mode: u32) -> std::io::Result<()> {
    fs::DirBuilder::new().recursive(true).mode(mode).create(dir)
}

/// Writes `contents` to `target` atomically with `mode`.
pub fn write_atomic(target: &Path, contents: &[u8], mode: u32) -> std::io::Result<()> {
    Staged::create(target, mode)?.commit(contents)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn mode(p: &Path) -> u32 {
        fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn staged_file_has_its_mode_from_the_start_and_replaces_the_target() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("token");
        fs::write(&target, "old").unwrap();
        fs::set_permissions(&target, fs::Permissions::from_mode(0o644)).unwrap();
        let staged = Staged::create(&target, 0o600).unwrap();
        assert_eq!(mode(&staged.tmp), 0o600);
        staged.commit(b"new").unwrap();
        assert_eq!(fs::read_to_string(&target).unwrap(), "new");
        assert_eq!(mode(&target), 0o600);
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1, "no temp left");
    }

    #[test]
    fn dropped_stage_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("token");
        drop(Staged::create(&target, 0o600).unwrap());
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_symlink_planted_at_the_staging_name_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        fs::write(&victim, "keep").unwrap();
        fs::set_permissions(&victim, fs::Permissions::from_mode(0o644)).unwrap();
        let target = dir.path().join("desired.json");
        let tmp = dir
            .path()
            .join(format!(".desired.json.tmp-{}", std::process::id()));
        std::os::unix::fs::symlink(&victim, &tmp).unwrap();
        write_atomic(&target, b"new", 0o600).unwrap();
        assert_eq!(fs::read_to_string(&victim).unwrap(), "keep");
        assert_eq!(mode(&victim), 0o644);
        assert_eq!(fs::read_to_string(&target).unwrap(), "new");
        assert!(fs::symlink_metadata(&target).unwrap().file_type().is_file());
    }

    #[test]
    fn unwritable_dir_fails_early() {
        let e = Staged::create(Path::new("/nonexistent/odac/token"), 0o600);
        assert!(e.is_err());
    }
}
