//! The launcher: the first thing `odac-agent run` does, before the runtime, the engine or
//! the link start. It reads `update/current.json` and decides which binary is the agent:
//! this (packaged) one, or a staged version. Like boot counting, an attempt is counted and
//! persisted *before* a pending version is executed, so a version that crashes, hangs (the
//! watchdog kills it) or never commits finds its attempts spent on the next start and is
//! marked failed without having to cooperate; the previous version then runs. A packaged
//! binary at least as new as the staged one (a later `apt install`) supersedes it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use tracing::{info, warn};

use super::state::{self, CurrentUpdate, Slot, UpdateState};
use super::version::newer;

/// Set (to the staged version) in the environment of a version the launcher executed, so it
/// does not launch again and knows it is on probation.
pub const LAUNCHED_ENV: &str = "ODAC_AGENT_LAUNCHED";
/// Starts a pending version gets before it is rolled back (the next start after a failed
/// one runs the previous version).
pub const MAX_ATTEMPTS: u32 = 1;

/// What `odac-agent run` does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// This binary is the agent.
    RunSelf,
    /// Replace this process with `slot`'s binary.
    Exec(Slot),
}

/// Replaces the process (the real one never returns on success).
pub trait Exec {
    /// Executes `path` with `args` and [`LAUNCHED_ENV`] = `version`; returns only on failure.
    fn exec(&self, path: &Path, args: &[OsString], version: &str) -> std::io::Error;
}

/// `execv` through std.
pub struct RealExec;

impl Exec for RealExec {
    fn exec(&self, path: &Path, args: &[OsString], version: &str) -> std::io::Error {
        use std::os::unix::process::CommandExt;
        std::process::Command::new(path)
            .args(args)
            .env(LAUNCHED_ENV, version)
            .exec()
    }
}

/// The decision for `record` (updated in place: attempts counted, failures marked, a
/// superseded version dropped) when this binary is `packaged`.
pub fn decide(record: &mut Option<CurrentUpdate>, packaged: &str) -> Decision {
    let Some(r) = record.as_mut() else {
        return Decision::RunSelf;
    };
    if r.state == UpdateState::Pending && r.attempts >= MAX_ATTEMPTS {
        let how_far = r.progress.as_deref().unwrap_or("not started");
        r.fail(format!(
            "version {} did not commit after {} start(s) (it crashed, hung or missed the commit window; last reached: {how_far})",
            r.slot.version, r.attempts
        ));
    }
    let Some(active) = r.active().cloned() else {
        return Decision::RunSelf;
    };
    if !newer(&active.version, packaged) {
        info!(
            staged = %active.version,
            packaged,
            "the packaged binary supersedes the staged version"
        );
        // nothing staged is active any more; the failed list is kept
        r.state = UpdateState::Superseded;
        r.previous = None;
        return Decision::RunSelf;
    }
    if !is_executable(&active.path) {
        warn!(
            version = %active.version,
            path = %active.path.display(),
            "the staged binary is missing or not executable: running the packaged one"
        );
        if r.state == UpdateState::Pending {
            r.fail(format!(
                "staged binary {} is missing",
                active.path.display()
            ));
        } else {
            r.previous = None;
            if r.state == UpdateState::Committed {
                r.fail(format!(
                    "staged binary {} is missing",
                    active.path.display()
                ));
            }
        }
        return Decision::RunSelf;
    }
    if r.state == UpdateState::Pending {
        r.attempts += 1;
        r.progress = Some("started".into());
    }
    Decision::Exec(active)
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Runs the launcher under `state_dir`: decides, persists the record, and executes a staged
/// version through `exec`. Returns when this binary is to run as the agent (also when the
/// record cannot be written: a version whose attempt is not counted is never started).
pub fn launch(state_dir: &Path, packaged: &str, args: &[OsString], exec: &dyn Exec) {
    if std::env::var_os(LAUNCHED_ENV).is_some() {
        return;
    }
    let mut record = match state::load(state_dir) {
        Ok(r) => r,
        Err(e) => {
            warn!("update record unreadable, running the packaged version: {e}");
            return;
        }
    };
    let before = record.clone();
    let decision = decide(&mut record, packaged);
    if record != before
        && let Some(r) = &record
        && let Err(e) = state::save(state_dir, r)
    {
        warn!("cannot write the update record, running the packaged version: {e}");
        return;
    }
    if let Decision::Exec(slot) = decision {
        info!(version = %slot.version, path = %slot.path.display(), "starting the staged version");
        let e = exec.exec(&slot.path, args, &slot.version);
        warn!(version = %slot.version, "cannot execute the staged version: {e}");
        if let Some(r) = record.as_mut() {
            r.fail(format!("cannot execute {}: {e}", slot.path.display()));
            let _ = state::save(state_dir, r);
        }
    }
}

/// The staged binary of `version` under `state_dir`.
pub fn staged_path(state_dir: &Path, version: &str) -> PathBuf {
    state::update_dir(state_dir)
        .join("versions")
        .join(version)
        .join("odac-agent")
}
