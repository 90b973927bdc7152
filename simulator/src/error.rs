//! Errors of the simulator's server side: TLS material, the state dir, binding the port.
//! Messages are lowercase and name the path or address that failed; tokens never appear.

use std::path::PathBuf;

/// A simulator failure.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// Reading or writing a file in the state dir failed.
    #[error("cannot {action} {path}: {source}")]
    Io {
        /// What was attempted, e.g. `write`.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A state file exists but does not parse.
    #[error("cannot parse {path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        message: String,
    },
    /// Generating or loading certificates failed.
    #[error("tls: {0}")]
    Tls(String),
    /// The listen address could not be bound or parsed.
    #[error("cannot listen on {addr}: {message}")]
    Listen {
        /// The address.
        addr: String,
        /// Why.
        message: String,
    },
    /// A token file is unusable (missing, readable by others, empty).
    #[error("token file {path}: {message}", path = path.display())]
    SecretFile {
        /// The file.
        path: PathBuf,
        /// Why (never the file's content).
        message: String,
    },
    /// The configuration is unusable (e.g. an open API on a public address).
    #[error("{0}")]
    Config(String),
    /// A client-side connection (simulated agent) failed.
    #[error("{0}")]
    Connect(String),
}

impl SimError {
    /// An IO error on `path`.
    pub fn io(action: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        SimError::Io {
            action,
            path: path.into(),
            source,
        }
    }
}
