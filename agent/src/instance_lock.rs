//! One live agent per engine and instance: [`InstanceLock`] is an exclusive `flock` on
//! `<lock_dir>/<instance>-<hash>.lock`, the hash taken over the engine endpoint (a unix socket
//! path is canonicalised, so `/var/run/docker.sock` and `/run/docker.sock` are one engine) and
//! the instance. `odac-agent run` and `odac-agent apply` take it before they touch the engine;
//! a second process asking for the same pair is refused with the holder's pid and agent id,
//! which the holder writes into the file. The kernel drops the lock when the holder's process
//! ends, however it ends, so a crashed agent never leaves it stuck; the files are never
//! removed (removing would let two processes lock two different files of the same name).
//!
//! The lock directory is the same for every state dir (default `/run/odac-agent`, key
//! `apps.lock_dir`), so two agents with different state dirs still see each other. Lock files
//! are readable by everyone (mode 0644): a process that may not write one still takes a
//! shared look at it through a read-only descriptor, which `flock` allows.
//!
//! The agent runs as root, so nothing here follows a link another user could plant: lock files
//! are opened with `O_NOFOLLOW` (a symlink is refused, never chmodded, truncated or written
//! through), must be regular files with one link and owned by this user before the mode is set
//! or the file truncated. A user who may not write in `apps.lock_dir` falls back to a directory
//! of their own ([`user_lock_dir`]) only when it is theirs: created 0700 when absent, and an
//! existing one must be a real directory (not a symlink) owned by this user with no access for
//! group or others; otherwise the lock is refused with an error naming `apps.lock_dir`.

use std::io::{Read, Seek, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// The default lock directory.
pub const DEFAULT_LOCK_DIR: &str = "/run/odac-agent";
/// The engine endpoint when neither `docker.host` nor `DOCKER_HOST` names one.
pub const DEFAULT_ENGINE: &str = "unix:///var/run/docker.sock";

/// Why the lock was not taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another live process holds it.
    #[error(
        "instance {instance:?} on engine {engine} is already managed by {holder} (lock {path}); \
         stop it first or give this agent another apps.instance",
        path = path.display()
    )]
    Held {
        /// The instance.
        instance: String,
        /// The engine endpoint.
        engine: String,
        /// Who holds it, as written in the file (`pid 1234, agent <id>`).
        holder: String,
        /// The lock file.
        path: PathBuf,
    },
    /// The lock directory or file could not be used.
    #[error("apps.lock_dir: cannot use {path}: {source}", path = path.display())]
    Io {
        /// The directory or file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The lock directory or file is not safe to use (a symlink, another user's, open to
    /// others).
    #[error(
        "apps.lock_dir: refusing {path}: {why}; set apps.lock_dir to a directory this user owns",
        path = path.display()
    )]
    Unsafe {
        /// The directory or file.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
}

/// The engine endpoint an agent talks to, in a canonical form: `docker_host`, else the
/// `DOCKER_HOST` environment variable, else [`DEFAULT_ENGINE`]; unix socket paths resolved.
pub fn engine_endpoint(docker_host: Option<&str>) -> String {
    let raw = docker_host
        .map(str::to_owned)
        .or_else(|| std::env::var("DOCKER_HOST").ok())
        .filter(|h| !h.trim().is_empty())
        .unwrap_or_else(|| DEFAULT_ENGINE.to_owned());
    let path = raw
        .strip_prefix("unix://")
        .or_else(|| raw.starts_with('/').then_some(raw.as_str()));
    match path {
        Some(p) => {
            let canonical = std::fs::canonicalize(p).unwrap_or_else(|_| PathBuf::from(p));
            format!("unix://{}", canonical.display())
        }
        None => raw.trim_end_matches('/').to_owned(),
    }
}

/// The lock file of `(engine, instance)` under `dir`.
pub fn lock_path(dir: &Path, engine: &str, instance: &str) -> PathBuf {
    let digest = Sha256::digest(format!("{engine}\n{instance}").as_bytes());
    let safe: String = instance
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    dir.join(format!("{safe}-{}.lock", hex::encode(&digest[..8])))
}

/// A held lock; dropping it (or the process ending) releases it.
#[derive(Debug)]
pub struct InstanceLock {
    file: std::fs::File,
    path: PathBuf,
}

impl InstanceLock {
    /// Takes the lock of `(engine, instance)` under `dir` for `holder` (an agent id or a
    /// command name), or says who has it. A user who may not write in `dir` (a non-root user
    /// beside a root service's `/run/odac-agent`) is still refused while `dir` shows the lock
    /// held, and otherwise locks in a directory of their own ([`user_lock_dir`]).
    pub fn acquire(
        dir: &Path,
        engine: &str,
        instance: &str,
        holder: &str,
    ) -> Result<InstanceLock, LockError> {
        match Self::acquire_in(dir, engine, instance, holder) {
            Err(LockError::Io { path, source }) if denied(&source) => {
                if let Some(other) = Self::holder(dir, engine, instance) {
                    return Err(held(dir, engine, instance, &other));
                }
                let own = user_lock_dir();
                if own == dir {
                    return Err(LockError::Io { path, source });
                }
                own_dir(&own)?;
                tracing::warn!(lock_dir = %dir.display(), fallback = %own.display(), error = %source, "cannot write in the lock directory; using one of this user's own");
                Self::acquire_in(&own, engine, instance, holder)
            }
            other => other,
        }
    }

    fn acquire_in(
        dir: &Path,
        engine: &str,
        instance: &str,
        holder: &str,
    ) -> Result<InstanceLock, LockError> {
        let io = |path: &Path| {
            let path = path.to_owned();
            move |source| LockError::Io { path, source }
        };
        if !dir.is_dir() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o755)
                .create(dir)
                .map_err(io(dir))?;
        }
        let path = lock_path(dir, engine, instance);
        let mut file = match std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&path)
        {
            Ok(file) => file,
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                return Err(unsafe_path(&path, "it is a symbolic link"));
            }
            Err(e) => return Err(io(&path)(e)),
        };
        check_lock_file(&file, &path)?;
        // the service's umask (0077) must not hide the holder from other users
        let _ = file.set_permissions(std::fs::Permissions::from_mode(0o644));
        if !try_flock(&file).map_err(io(&path))? {
            let mut text = String::new();
            let _ = file.read_to_string(&mut text);
            return Err(held(dir, engine, instance, text.trim()));
        }
        let note = format!("pid {}, {holder}\n", std::process::id());
        file.set_len(0).map_err(io(&path))?;
        file.rewind().map_err(io(&path))?;
        file.write_all(note.as_bytes()).map_err(io(&path))?;
        let _ = file.sync_data();
        Ok(InstanceLock { file, path })
    }

    /// Whether another process holds the lock of `(engine, instance)` under `dir`, and who;
    /// `None` when it is free (or there is no lock file). Takes nothing.
    pub fn holder(dir: &Path, engine: &str, instance: &str) -> Option<String> {
        let path = lock_path(dir, engine, instance);
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(&path)
            .ok()?;
        if !file.metadata().ok()?.file_type().is_file() {
            return None;
        }
        match try_flock(&file) {
            Ok(true) => None,
            Ok(false) => {
                let mut text = String::new();
                let _ = file.read_to_string(&mut text);
                Some(text.trim().to_owned())
            }
            Err(_) => None,
        }
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for InstanceLock {
    fn drop(&mut self) {
        // closing the file releases it too; unlock first so a probe never sees a stale holder
        let _ = rustix::fs::flock(&self.file, rustix::fs::FlockOperation::Unlock);
    }
}

/// The lock directory of a user who may not write in the configured one:
/// `$XDG_RUNTIME_DIR/odac-agent`, else `<temp dir>/odac-agent-<uid>`.
pub fn user_lock_dir() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        Some(d) => PathBuf::from(d).join("odac-agent"),
        None => {
            std::env::temp_dir().join(format!("odac-agent-{}", rustix::process::getuid().as_raw()))
        }
    }
}

/// This user's effective uid.
fn our_uid() -> u32 {
    rustix::process::geteuid().as_raw()
}

fn unsafe_path(path: &Path, why: impl Into<String>) -> LockError {
    LockError::Unsafe {
        path: path.to_owned(),
        why: why.into(),
    }
}

/// Makes sure the fallback directory `dir` is this user's own: created 0700 when absent (its
/// parent is a shared directory such as `/tmp`), else a real directory (not a symlink) owned
/// by this user without access for group or others.
fn own_dir(dir: &Path) -> Result<(), LockError> {
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(source) => {
            return Err(LockError::Io {
                path: dir.to_owned(),
                source,
            });
        }
    }
    let meta = std::fs::symlink_metadata(dir).map_err(|source| LockError::Io {
        path: dir.to_owned(),
        source,
    })?;
    if meta.file_type().is_symlink() {
        return Err(unsafe_path(dir, "it is a symbolic link"));
    }
    if !meta.is_dir() {
        return Err(unsafe_path(dir, "it is not a directory"));
    }
    if meta.uid() != our_uid() {
        return Err(unsafe_path(
            dir,
            format!("it belongs to uid {}, not to uid {}", meta.uid(), our_uid()),
        ));
    }
    if meta.mode() & 0o077 != 0 {
        return Err(unsafe_path(
            dir,
            format!(
                "its mode is {:04o}, group or others may use it (want 0700)",
                meta.mode() & 0o7777
            ),
        ));
    }
    Ok(())
}

/// The opened lock file must be a regular file with one link, owned by this user, before it
/// is chmodded or truncated (a hard link to another file is refused like a symlink).
fn check_lock_file(file: &std::fs::File, path: &Path) -> Result<(), LockError> {
    let meta = file.metadata().map_err(|source| LockError::Io {
        path: path.to_owned(),
        source,
    })?;
    if !meta.file_type().is_file() {
        return Err(unsafe_path(path, "it is not a regular file"));
    }
    if meta.nlink() != 1 {
        return Err(unsafe_path(
            path,
            format!("it has {} hard links, want 1", meta.nlink()),
        ));
    }
    if meta.uid() != our_uid() {
        return Err(unsafe_path(
            path,
            format!("it belongs to uid {}, not to uid {}", meta.uid(), our_uid()),
        ));
    }
    Ok(())
}

fn denied(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem
    )
}

fn held(dir: &Path, engine: &str, instance: &str, holder: &str) -> LockError {
    LockError::Held {
        instance: instance.to_owned(),
        engine: engine.to_owned(),
        holder: if holder.is_empty() {
            "another process".to_owned()
        } else {
            holder.to_owned()
        },
        path: lock_path(dir, engine, instance),
    }
}

/// `flock(LOCK_EX | LOCK_NB)`: true when taken, false when another open file description
/// holds it. A lock taken on a probe's own descriptor is released when that file closes.
fn try_flock(file: &std::fs::File) -> std::io::Result<bool> {
    loop {
        match rustix::fs::flock(file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => return Ok(true),
            Err(rustix::io::Errno::WOULDBLOCK) => return Ok(false),
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests;
