//! Unacked `removed` statuses, kept in `<state_dir>/unacked_removals.json` (atomic write,
//! mode 0600) so that an agent restart does not lose them: a `removed` status is the last
//! word about an app whose container is gone, and nothing would report it again. Each entry
//! keeps its report `seq`; after a restart the outbox takes the entries back and resends
//! them with that `seq` (PROTOCOL.md 4.4). An entry leaves the file when its `seq` is acked or
//! a newer status of the same app replaces it. Other reports need no log: the statuses of
//! current apps and the inventory are sent afresh after every restart. An unreadable or
//! corrupt file is logged and treated as empty; a failed write is logged and retried with the
//! next change.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use odac_protocol::{AppState, AppStatus};
use serde::{Deserialize, Serialize};

use crate::appmgr::state::store::write_atomic;

/// File name of the log inside the state directory.
pub const REMOVALS_FILE: &str = "unacked_removals.json";

/// One unacked `removed` status with its `seq`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UnackedRemoval {
    /// The report's `seq`, kept on resend.
    pub seq: u64,
    /// The `removed` status.
    pub status: AppStatus,
}

/// The persisted unacked `removed` statuses, by app name.
#[derive(Debug)]
pub struct RemovalLog {
    path: PathBuf,
    entries: BTreeMap<String, UnackedRemoval>,
    /// A write failed and was logged.
    failing: bool,
}

impl RemovalLog {
    /// Reads the log in `state_dir`; returns it and the removals it holds, in `seq` order.
    pub fn open(state_dir: &Path) -> (RemovalLog, Vec<UnackedRemoval>) {
        let path = state_dir.join(REMOVALS_FILE);
        let loaded: Vec<UnackedRemoval> = match std::fs::read(&path) {
            Ok(bytes) => odac_protocol::decode_document(&bytes).unwrap_or_else(|e| {
                tracing::warn!(path = %path.display(), error = %e.reply_text(), "unacked removals file is corrupt; starting without it");
                Vec::new()
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cannot read the unacked removals file; starting without it");
                Vec::new()
            }
        };
        let entries: BTreeMap<String, UnackedRemoval> = loaded
            .into_iter()
            .filter(|r| r.status.state == AppState::Removed)
            .map(|r| (r.status.name.clone(), r))
            .collect();
        let mut out: Vec<UnackedRemoval> = entries.values().cloned().collect();
        out.sort_by_key(|r| r.seq);
        (
            RemovalLog {
                path,
                entries,
                failing: false,
            },
            out,
        )
    }

    /// A status of `status.name` was queued with `seq`: a `removed` one is kept, any other
    /// replaces (forgets) a kept one.
    pub fn queued(&mut self, seq: u64, status: &AppStatus) {
        let changed = if status.state == AppState::Removed {
            self.entries.insert(
                status.name.clone(),
                UnackedRemoval {
                    seq,
                    status: status.clone(),
                },
            );
            true
        } else {
            self.entries.remove(&status.name).is_some()
        };
        if changed {
            self.save();
        }
    }

    /// The status of `name` with `seq` was acked, or dropped from the outbox.
    pub fn done(&mut self, name: &str, seq: u64) {
        if self.entries.get(name).is_some_and(|r| r.seq == seq) {
            self.entries.remove(name);
            self.save();
        }
    }

    fn save(&mut self) {
        let list: Vec<&UnackedRemoval> = self.entries.values().collect();
        match write_atomic(&self.path, &list) {
            Ok(()) => {
                if self.failing {
                    tracing::info!(path = %self.path.display(), "unacked removals file writable again");
                }
                self.failing = false;
            }
            Err(e) => {
                if !self.failing {
                    tracing::warn!(error = %e, "cannot persist unacked removed statuses; an agent restart would lose them");
                }
                self.failing = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn status(name: &str, state: AppState) -> AppStatus {
        AppStatus {
            name: name.to_owned(),
            generation: 7,
            state,
            ..AppStatus::default()
        }
    }

    #[test]
    fn removals_survive_a_reopen_until_acked_or_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, loaded) = RemovalLog::open(dir.path());
        assert!(loaded.is_empty());
        log.queued(12, &status("web", AppState::Removed));
        log.queued(13, &status("api", AppState::Removed));
        log.queued(14, &status("db", AppState::Running));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join(REMOVALS_FILE))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let (mut log, loaded) = RemovalLog::open(dir.path());
        assert_eq!(
            loaded.iter().map(|r| r.seq).collect::<Vec<_>>(),
            vec![12, 13]
        );
        assert_eq!(loaded[0].status, status("web", AppState::Removed));
        log.done("web", 11); // not its seq
        log.done("web", 12);
        log.queued(15, &status("api", AppState::Pending)); // api added again
        let (_, loaded) = RemovalLog::open(dir.path());
        assert!(loaded.is_empty(), "{loaded:?}");
    }

    #[test]
    fn a_corrupt_file_is_treated_as_empty() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(REMOVALS_FILE), b"{not json").unwrap();
        let (mut log, loaded) = RemovalLog::open(dir.path());
        assert!(loaded.is_empty());
        log.queued(3, &status("web", AppState::Removed));
        let (_, loaded) = RemovalLog::open(dir.path());
        assert_eq!(loaded.len(), 1);
    }
}
