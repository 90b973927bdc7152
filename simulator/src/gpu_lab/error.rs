//! Errors of the GPU lab: each names the path, command or input that failed.

use std::path::PathBuf;

/// Why the GPU lab could not start or stop cleanly.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// The `--gpus` list is not `vendor:count[,vendor:count…]`.
    #[error("invalid --gpus {input:?}: {why}")]
    Gpus {
        /// The text given.
        input: String,
        /// What is wrong with it.
        why: String,
    },
    /// A file or directory of the lab could not be made or removed.
    #[error("{what} {path}: {source}")]
    Io {
        /// The operation (`create`, `write`, `remove`, …).
        what: &'static str,
        /// The path it was done on.
        path: PathBuf,
        /// The system error.
        source: std::io::Error,
    },
    /// A command the lab runs failed.
    #[error("{command}: {message}")]
    Command {
        /// The command line, short.
        command: String,
        /// Its error output or why it could not run.
        message: String,
    },
    /// The lab's engine did not come up or did not answer.
    #[error("lab engine at {socket}: {message}")]
    Engine {
        /// The engine's socket.
        socket: PathBuf,
        /// What went wrong.
        message: String,
    },
}

impl LabError {
    /// An IO error on `path`.
    pub fn io(what: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        LabError::Io {
            what,
            path: path.into(),
            source,
        }
    }

    /// A failed command.
    pub fn command(command: impl Into<String>, message: impl Into<String>) -> Self {
        LabError::Command {
            command: command.into(),
            message: message.into(),
        }
    }
}
