//! Probation of a version the launcher started: it is pending until it has connected to the
//! control plane and completed a reconcile pass within `update.commit_within_secs`; then it
//! commits (`update/current.json` says `committed`). When the window passes first, the
//! version notes how far it got and stops; the launcher of the next start finds its attempts
//! spent and runs the previous version. A crash or a watchdog kill ends up the same way
//! without this code running at all.

use std::path::{Path, PathBuf};

use super::state::{self, CurrentUpdate, UpdateState};

/// A pending version on probation.
#[derive(Debug, Clone)]
pub struct Probation {
    state_dir: PathBuf,
    version: String,
}

impl Probation {
    /// The probation of `version`, when the record has it pending.
    pub fn of(state_dir: &Path, version: &str) -> Option<Self> {
        let record = state::load(state_dir).ok()??;
        (record.state == UpdateState::Pending && record.slot.version == version).then(|| Self {
            state_dir: state_dir.to_owned(),
            version: version.to_owned(),
        })
    }

    /// The version on probation.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// Notes how far the version got (`ready`, `connected`, ...), for the failure's cause.
    pub fn progress(&self, stage: &str) -> std::io::Result<()> {
        self.change(|r| r.progress = Some(stage.to_owned()))
    }

    /// Commits the version: it stays.
    pub fn commit(&self) -> std::io::Result<()> {
        self.change(|r| {
            r.state = UpdateState::Committed;
            r.progress = Some("committed".into());
        })
    }

    fn change(&self, f: impl FnOnce(&mut CurrentUpdate)) -> std::io::Result<()> {
        let mut record = state::load(&self.state_dir)
            .map_err(std::io::Error::other)?
            .ok_or_else(|| std::io::Error::other("the update record is gone"))?;
        if record.state != UpdateState::Pending || record.slot.version != self.version {
            return Err(std::io::Error::other(format!(
                "version {} is no longer pending",
                self.version
            )));
        }
        f(&mut record);
        state::save(&self.state_dir, &record)
    }
}
