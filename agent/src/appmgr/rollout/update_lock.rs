//! The update lock: an app can defer its updates while it is busy (a recording, a long
//! inference job). Every container gets a per-app directory of the agent's state dir,
//! `<state_dir>/run/<app>`, bind-mounted read-write at `/run/odac` (mode 0777: the app's user is
//! not known in advance); while `/run/odac/update.lock` exists, a rollout waits (the previous
//! version keeps running, the status says `update_waiting_lock`), for at most
//! `update.max_lock_secs` counted from the lock file's modification time, after which the
//! update proceeds with a warning. The lock file is only looked at (never followed, never
//! read): whatever the app puts there cannot make the agent open another file.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use odac_host::engine::Bind;

/// Where the lock directory appears inside the container.
pub(crate) const LOCK_TARGET: &str = "/run/odac";

/// The lock file's name in that directory.
pub(crate) const LOCK_FILE: &str = "update.lock";

/// The host directory of `app`'s lock directory.
pub(crate) fn host_dir(state_dir: &Path, app: &str) -> PathBuf {
    state_dir.join("run").join(app)
}

/// The bind of `app`'s lock directory, the directory made first; `None` (logged) when it
/// cannot be made: the app then runs without a lock directory.
pub(crate) fn bind(state_dir: &Path, app: &str) -> Option<Bind> {
    let dir = host_dir(state_dir, app);
    let made = std::fs::create_dir_all(&dir).and_then(|()| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777))?;
        std::fs::canonicalize(&dir)
    });
    match made {
        Ok(dir) => Some(Bind {
            source: dir.display().to_string(),
            target: LOCK_TARGET.to_owned(),
            read_only: false,
        }),
        Err(e) => {
            tracing::warn!(app, dir = %dir.display(), error = %e, "could not make the app's update lock directory: it runs without /run/odac");
            None
        }
    }
}

/// Whether `b` is the lock directory bind [`bind`] made for `app`.
pub(crate) fn is_lock_bind(b: &Bind, state_dir: &Path, app: &str) -> bool {
    b.target == LOCK_TARGET
        && std::fs::canonicalize(host_dir(state_dir, app))
            .is_ok_and(|dir| dir.display().to_string() == b.source)
}

/// Whether an update of the app may proceed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lock {
    /// No lock file.
    Free,
    /// The app holds the lock; the update waits until this time (Unix ms) at most.
    Held {
        /// `max_lock_secs` after the lock file's modification time.
        until_ms: u64,
    },
    /// The lock is older than `max_lock_secs`: the update proceeds anyway.
    Expired {
        /// The lock's age in seconds.
        age_secs: u64,
    },
}

/// The lock of `app` at `now` with the given bound.
pub(crate) fn check(state_dir: &Path, app: &str, max_lock_secs: u32, now: SystemTime) -> Lock {
    let path = host_dir(state_dir, app).join(LOCK_FILE);
    let Ok(meta) = std::fs::symlink_metadata(&path) else {
        return Lock::Free;
    };
    let modified = meta.modified().unwrap_or(now);
    let age = now.duration_since(modified).unwrap_or_default();
    let max = Duration::from_secs(u64::from(max_lock_secs));
    if age >= max {
        return Lock::Expired {
            age_secs: age.as_secs(),
        };
    }
    let until = modified + max;
    let until_ms = until
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or_default();
    Lock::Held { until_ms }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_holds_until_it_is_older_than_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let now = SystemTime::now();
        assert_eq!(check(dir.path(), "web", 60, now), Lock::Free);
        let bind = bind(dir.path(), "web").unwrap();
        assert_eq!(bind.target, "/run/odac");
        assert!(!bind.read_only);
        assert!(is_lock_bind(&bind, dir.path(), "web"));
        assert!(!is_lock_bind(&bind, dir.path(), "api"));
        std::fs::write(host_dir(dir.path(), "web").join(LOCK_FILE), b"").unwrap();
        let Lock::Held { until_ms } = check(dir.path(), "web", 60, now) else {
            panic!("a fresh lock holds");
        };
        let now_ms = now
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        assert!(
            (now_ms + 55_000..=now_ms + 61_000).contains(&until_ms),
            "{until_ms}"
        );
        let later = now + Duration::from_secs(61);
        assert!(matches!(
            check(dir.path(), "web", 60, later),
            Lock::Expired { age_secs } if age_secs >= 60
        ));
        // a link is looked at, not followed: a dangling one still holds
        let lock = host_dir(dir.path(), "web").join(LOCK_FILE);
        std::fs::remove_file(&lock).unwrap();
        std::os::unix::fs::symlink("/nonexistent", &lock).unwrap();
        assert!(matches!(
            check(dir.path(), "web", 60, now),
            Lock::Held { .. }
        ));
    }
}
