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

use std::io::{Read, Seek, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
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
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o644)
            .open(&path)
            .map_err(io(&path))?;
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
        let mut file = std::fs::File::open(&path).ok()?;
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
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn second_holder_is_refused_and_named_until_the_first_drops() {
        let dir = tempfile::tempdir().unwrap();
        let engine = "unix:///nowhere/docker.sock";
        let first = InstanceLock::acquire(dir.path(), engine, "odac", "agent a-1").unwrap();
        let text = std::fs::read_to_string(first.path()).unwrap();
        assert_eq!(text, format!("pid {}, agent a-1\n", std::process::id()));
        let err = InstanceLock::acquire(dir.path(), engine, "odac", "agent b-2").unwrap_err();
        let message = err.to_string();
        assert!(message.contains("agent a-1"), "{message}");
        assert!(
            message.contains(&format!("pid {}", std::process::id())),
            "{message}"
        );
        assert!(!message.contains('\n'), "one line: {message}");
        assert_eq!(
            InstanceLock::holder(dir.path(), engine, "odac").as_deref(),
            Some(text.trim())
        );
        // another instance, or another engine, is another lock
        let other = InstanceLock::acquire(dir.path(), engine, "odac-demo", "agent b-2").unwrap();
        let tcp = InstanceLock::acquire(dir.path(), "tcp://127.0.0.1:2375", "odac", "b").unwrap();
        drop(first);
        assert_eq!(InstanceLock::holder(dir.path(), engine, "odac"), None);
        let again = InstanceLock::acquire(dir.path(), engine, "odac", "agent b-2").unwrap();
        let text = std::fs::read_to_string(again.path()).unwrap();
        assert!(text.ends_with("agent b-2\n"), "{text}");
        drop((other, tcp));
    }

    #[test]
    fn endpoints_are_canonical() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("docker.sock");
        std::fs::write(&sock, "").unwrap();
        let link = dir.path().join("link.sock");
        std::os::unix::fs::symlink(&sock, &link).unwrap();
        let a = engine_endpoint(Some(&format!("unix://{}", sock.display())));
        let b = engine_endpoint(Some(&format!("unix://{}", link.display())));
        assert_eq!(a, b);
        assert_eq!(engine_endpoint(Some(&sock.display().to_string())), a);
        assert_eq!(
            engine_endpoint(Some("tcp://127.0.0.1:2375/")),
            "tcp://127.0.0.1:2375"
        );
        assert_ne!(
            lock_path(dir.path(), &a, "odac"),
            lock_path(dir.path(), &a, "odac2")
        );
    }
}
