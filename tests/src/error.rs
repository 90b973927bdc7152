//! The harness's error type: every failure names what was being done (the process, the file,
//! the command, the condition waited for) so a failed end-to-end test reads as a sentence.

use std::path::PathBuf;
use std::time::Duration;

/// What went wrong in the harness.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file or socket operation failed.
    #[error("{what} {path}: {source}", path = path.display())]
    Io {
        /// The operation, e.g. `write config`.
        what: String,
        /// The path it was done on.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A process could not be started or a command failed.
    #[error("{command}: {message}")]
    Command {
        /// The command line or process name.
        command: String,
        /// Why it failed (exit status and stderr, or the spawn error).
        message: String,
    },
    /// A condition did not become true in time.
    #[error("timed out after {waited:?} waiting for {what}; last seen: {last}")]
    Timeout {
        /// The condition.
        what: String,
        /// How long it was waited for.
        waited: Duration,
        /// The last observation.
        last: String,
    },
    /// Docker is unreachable and the developer did not opt out (`ODAC_ALLOW_SKIP=1`).
    #[error(
        "the docker engine is unreachable: {0}; start Docker, or set ODAC_ALLOW_SKIP=1 to skip \
         the tests that need it"
    )]
    DockerRequired(String),
    /// Anything else, described.
    #[error("{0}")]
    Other(String),
}

impl Error {
    /// An [`Error::Io`].
    pub fn io(what: impl Into<String>, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            what: what.into(),
            path: path.into(),
            source,
        }
    }

    /// An [`Error::Command`].
    pub fn command(command: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Command {
            command: command.into(),
            message: message.into(),
        }
    }
}

/// The harness's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
