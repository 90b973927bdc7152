//! Exec in a running container, as the engine seam offers it: [`ExecSpec`] (command, TTY,
//! user, first terminal size), and the [`ExecProcess`] that comes back: its output as a stream
//! of [`ExecChunk`]s (stdout and stderr apart; one stream with a TTY), its standard input as a
//! writer (when attached), and an [`ExecControl`] to resize its TTY and read its exit code.
//! Exec is never privileged: the spec has no way to ask for it.

use std::pin::Pin;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::Stream;
use tokio::io::AsyncWrite;

use super::error::EngineError;

/// What to run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecSpec {
    /// The command and its arguments.
    pub cmd: Vec<String>,
    /// Allocate a TTY (stdout and stderr become one stream).
    pub tty: bool,
    /// Attach standard input.
    pub stdin: bool,
    /// Run as this user (`None`: the container's user).
    pub user: Option<String>,
    /// First terminal size, `(cols, rows)` (TTY only).
    pub size: Option<(u16, u16)>,
}

/// Output of an exec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecChunk {
    /// Standard output (or the TTY's output).
    Stdout(Bytes),
    /// Standard error (never with a TTY).
    Stderr(Bytes),
}

impl ExecChunk {
    /// The bytes, whichever stream.
    pub fn bytes(&self) -> &Bytes {
        match self {
            Self::Stdout(b) | Self::Stderr(b) => b,
        }
    }
}

/// The output stream of an exec; it ends when the command's output does.
pub type ExecOutput = Pin<Box<dyn Stream<Item = Result<ExecChunk, EngineError>> + Send>>;
/// The standard input of an exec (a sink that discards when stdin is not attached).
pub type ExecInput = Pin<Box<dyn AsyncWrite + Send>>;

/// Resizes and inspects a running exec.
#[async_trait]
pub trait ExecControl: Send + Sync {
    /// Sets the TTY's size.
    async fn resize(&self, cols: u16, rows: u16) -> Result<(), EngineError>;
    /// The exit code, once the command has exited (`None` while it runs).
    async fn exit_code(&self) -> Result<Option<i64>, EngineError>;
}

/// A started exec.
pub struct ExecProcess {
    /// The engine's id of the exec.
    pub id: String,
    /// Its output.
    pub output: ExecOutput,
    /// Its standard input.
    pub input: ExecInput,
    /// Resize and exit code.
    pub control: Arc<dyn ExecControl>,
}

impl std::fmt::Debug for ExecProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecProcess")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}
