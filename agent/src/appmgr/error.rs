//! Errors of the app manager: a desired state that does not validate, state files that
//! cannot be written or read, and a spec the local policy refuses. Engine trouble is never
//! an error here: it is a status (`engine_unavailable`), retried with backoff.

use std::path::PathBuf;

use odac_protocol::ValidationError;
use thiserror::Error;

/// Why a desired-state change was refused or the manager could not open.
#[derive(Debug, Error)]
pub enum AppMgrError {
    /// The desired state does not validate; the previous state is kept.
    #[error("invalid desired state: {0}")]
    Invalid(#[from] ValidationError),
    /// The state directory could not be read or written.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The agent id (the owner recorded on containers) could not be read or created.
    #[error(transparent)]
    Identity(#[from] crate::identity::IdentityError),
}

/// A state file problem.
#[derive(Debug, Error)]
pub enum StoreError {
    /// Reading, writing, syncing or renaming failed.
    #[error("state file {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file is not what it should be; it was moved aside to `moved_to`.
    #[error("state file {path} is corrupt ({problem}); moved aside to {moved_to}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// Where it is now.
        moved_to: PathBuf,
        /// What was wrong.
        problem: String,
    },
    /// Serialising failed (cannot happen with the agent's own types).
    #[error("cannot encode {path}: {source}")]
    Encode {
        /// The file.
        path: PathBuf,
        /// The serde error.
        source: serde_json::Error,
    },
}

/// A spec the policy refuses: the offending field and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct PolicyViolation {
    /// The field, relative to the app spec (e.g. `volumes[0].source`).
    pub field: String,
    /// Why.
    pub message: String,
}
