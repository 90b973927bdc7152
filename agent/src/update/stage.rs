//! Download and stage a verified release: a disk check first (the artefact twice over and a
//! margin must fit in the state dir), the download ([`super::fetch`]: the agent's HTTP client
//! with the link's TLS trust, in resumed ranges; a failed one starts over on the next offer),
//! the size and SHA-256 checked in memory, and only then the binary written: to a
//! non-executable temporary file,
//! renamed to `update/versions/<version>/odac-agent` and made executable last. Nothing that
//! failed a check is ever on disk where it could run. The packaged binary is never touched.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

pub use super::fetch::MAX_ARTEFACT;
use super::fetch::{Fetch, Progress};

use super::manifest::Manifest;
use super::state::{Slot, update_dir};

/// Free space kept beyond the artefact, bytes.
pub const DISK_MARGIN: u64 = 64 << 20;

/// Why a release was not staged.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum StageError {
    #[error("not enough disk space in {dir}: {needed} bytes needed, {free} free")]
    DiskFull { dir: String, needed: u64, free: u64 },
    #[error("artefact of release {version} is {size} bytes, more than the {max} accepted")]
    TooLarge {
        version: String,
        size: u64,
        max: u64,
    },
    #[error("download of release {version} failed: {why}")]
    Download { version: String, why: String },
    #[error("artefact of release {version} is {got} bytes, the manifest says {want}")]
    WrongSize {
        version: String,
        got: u64,
        want: u64,
    },
    #[error("artefact of release {version} has sha256 {got}, the manifest says {want}")]
    WrongHash {
        version: String,
        got: String,
        want: String,
    },
    #[error("cannot write release {version} under {dir}: {why}")]
    Write {
        version: String,
        dir: String,
        why: String,
    },
}

/// Free space of a directory's file system.
pub trait DiskSpace: Send + Sync {
    fn free_bytes(&self, dir: &Path) -> std::io::Result<u64>;
}

/// `statvfs`.
pub struct RealDisk;

impl DiskSpace for RealDisk {
    fn free_bytes(&self, dir: &Path) -> std::io::Result<u64> {
        let s = rustix::fs::statvfs(dir)?;
        Ok(s.f_bavail.saturating_mul(s.f_frsize))
    }
}

/// Checks the disk, downloads, checks size and hash, and writes the binary; returns its slot.
pub async fn stage(
    state_dir: &Path,
    manifest: &Manifest,
    fetch: &dyn Fetch,
    disk: &dyn DiskSpace,
    progress: Progress<'_>,
) -> Result<Slot, StageError> {
    let version = manifest.version.clone();
    if manifest.size > MAX_ARTEFACT {
        return Err(StageError::TooLarge {
            version,
            size: manifest.size,
            max: MAX_ARTEFACT,
        });
    }
    let dir = update_dir(state_dir);
    let write_err = |why: String| StageError::Write {
        version: manifest.version.clone(),
        dir: dir.display().to_string(),
        why,
    };
    odac_host::atomic_file::create_dir(&dir, 0o700).map_err(|e| write_err(e.to_string()))?;
    let free = disk
        .free_bytes(&dir)
        .map_err(|e| write_err(format!("free space: {e}")))?;
    let needed = manifest.size.saturating_mul(2).saturating_add(DISK_MARGIN);
    if free < needed {
        return Err(StageError::DiskFull {
            dir: dir.display().to_string(),
            needed,
            free,
        });
    }
    let body = fetch
        .fetch(&manifest.url, manifest.size, progress)
        .await
        .map_err(|why| StageError::Download {
            version: version.clone(),
            why,
        })?;
    check(manifest, &body)?;
    let path = write_binary(&dir, &version, &body).map_err(|e| write_err(e.to_string()))?;
    Ok(Slot { version, path })
}

/// Size, then hash.
pub fn check(manifest: &Manifest, body: &[u8]) -> Result<(), StageError> {
    let got = body.len() as u64;
    if got != manifest.size {
        return Err(StageError::WrongSize {
            version: manifest.version.clone(),
            got,
            want: manifest.size,
        });
    }
    let hash = hex::encode(Sha256::digest(body));
    if hash != manifest.sha256 {
        return Err(StageError::WrongHash {
            version: manifest.version.clone(),
            got: hash,
            want: manifest.sha256.clone(),
        });
    }
    Ok(())
}

/// Writes `versions/<version>/odac-agent` (0600, then 0755 once complete); on failure
/// nothing of it is left.
fn write_binary(dir: &Path, version: &str, body: &[u8]) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let vdir = dir.join("versions").join(version);
    odac_host::atomic_file::create_dir(&vdir, 0o700)?;
    let path = vdir.join("odac-agent");
    let written = odac_host::atomic_file::write_atomic(&path, body, 0o600)
        .and_then(|()| std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)));
    if let Err(e) = written {
        let _ = std::fs::remove_dir_all(&vdir);
        return Err(e);
    }
    Ok(path)
}

/// Removes staged versions other than `keep` (the active and the previous one).
pub fn prune(state_dir: &Path, keep: &[&str]) {
    let versions = update_dir(state_dir).join("versions");
    let Ok(entries) = std::fs::read_dir(&versions) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !keep.iter().any(|k| name == std::ffi::OsStr::new(k)) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}
