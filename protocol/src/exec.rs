//! Exec sessions (a command or a shell inside an app's container). The control plane asks on
//! the main link with `exec_request`, which carries a one-time ticket; the agent refuses on
//! the main link (`exec_refused`) or dials a second WebSocket for that session
//! (`<agent url>/exec`, subprotocol [`EXEC_SUBPROTOCOL`], the same TLS trust and bearer token,
//! the ticket in the [`EXEC_TICKET_HEADER`] header). On that socket binary frames carry the
//! bytes: their first byte names the stream ([`STREAM_STDIN`], [`STREAM_STDOUT`],
//! [`STREAM_STDERR`]), the rest is the data; text frames are [`ExecFrame`]s (`resize` and
//! `stdin_eof` one way, `exit` the other). Bulk terminal bytes never travel on the main link, so they cannot delay
//! heartbeats or reports.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::validation::{
    ValidationError, check_command, check_dns_label, check_len, check_opt_string, check_range,
    check_required, check_string,
};

/// WebSocket subprotocol of the exec channel.
pub const EXEC_SUBPROTOCOL: &str = "odac.exec.v1";
/// Header of the agent's exec upgrade that carries the session's ticket.
pub const EXEC_TICKET_HEADER: &str = "odac-exec-ticket";
/// What the agent appends to its control-plane URL to dial an exec session.
pub const EXEC_PATH_SUFFIX: &str = "/exec";
/// Longest `session_id`, in bytes.
pub const MAX_EXEC_SESSION_ID: usize = 64;
/// Longest ticket, in bytes.
pub const MAX_EXEC_TICKET: usize = 128;
/// Largest binary frame on the exec channel, stream byte included.
pub const MAX_EXEC_DATA_FRAME: usize = 64 * 1024 + 1;
/// Binary frame stream byte: bytes for the command's standard input (control plane → agent).
pub const STREAM_STDIN: u8 = 0;
/// Binary frame stream byte: the command's standard output (or the TTY's output).
pub const STREAM_STDOUT: u8 = 1;
/// Binary frame stream byte: the command's standard error (never with a TTY).
pub const STREAM_STDERR: u8 = 2;

/// A one-time secret: shown as `<redacted>` by `Debug`, so it never reaches a log.
#[derive(Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct Ticket(pub String);

impl std::fmt::Debug for Ticket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Ticket(<redacted>)")
    }
}

/// `exec_request`: run `cmd` in the container of `app`, the bytes going over a session socket
/// the agent dials with `ticket`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct ExecRequest {
    /// Chosen by the control plane, unique; the ticket is bound to it.
    pub session_id: String,
    /// The app whose container runs the command.
    pub app: String,
    /// The command and its arguments (at least one).
    pub cmd: Vec<String>,
    /// Allocate a TTY (interactive shell): one output stream, stdin attached.
    #[serde(default)]
    pub tty: bool,
    /// Attach standard input without a TTY (`odac app exec -i`); its end is `stdin_eof`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stdin: bool,
    /// Run as this user (`user`, `uid`, `user:group`); only when the agent's policy allows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Initial terminal width (TTY only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cols: Option<u16>,
    /// Initial terminal height (TTY only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows: Option<u16>,
    /// Who asked, as the control plane knows them (for the audit trail).
    pub principal: String,
    /// The one-time ticket the agent presents when it dials the session socket.
    pub ticket: Ticket,
}

/// `exec_refused`: the agent will not run the session (it does not dial).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct ExecRefused {
    /// The session.
    pub session_id: String,
    /// Why.
    pub reason: ExecEndReason,
    /// For people, e.g. `exec is disabled on this agent ([exec] enabled = false)`.
    pub message: String,
}

/// Why an exec session ended (or was refused).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ExecEndReason {
    /// The command exited; `code` is its status.
    #[default]
    Exited,
    /// Exec is disabled on the agent (`[exec] enabled = false`).
    Disabled,
    /// The agent already runs `max_sessions` sessions.
    Busy,
    /// The app is unknown or has no running container.
    NotFound,
    /// Not allowed: a container of another owner, a `user` the policy does not allow.
    Forbidden,
    /// Nothing was typed or printed for the idle timeout.
    IdleTimeout,
    /// The session reached its maximum lifetime.
    MaxLifetime,
    /// The reader stopped reading and too much output was left unsent.
    Backpressure,
    /// The viewer went away.
    Cancelled,
    /// The agent is shutting down.
    Shutdown,
    /// Something failed; see `message`.
    Error,
}

impl ExecEndReason {
    /// The wire word.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Exited => "exited",
            Self::Disabled => "disabled",
            Self::Busy => "busy",
            Self::NotFound => "not_found",
            Self::Forbidden => "forbidden",
            Self::IdleTimeout => "idle_timeout",
            Self::MaxLifetime => "max_lifetime",
            Self::Backpressure => "backpressure",
            Self::Cancelled => "cancelled",
            Self::Shutdown => "shutdown",
            Self::Error => "error",
        }
    }
}

impl std::fmt::Display for ExecEndReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A text frame of the exec channel.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ExecFrame {
    /// The terminal's new size (viewer → agent; TTY sessions).
    Resize(ExecResize),
    /// The session is over (agent → viewer; the last frame).
    Exit(ExecExit),
    /// The viewer's standard input ended (viewer → agent): the command's input is closed.
    StdinEof(ExecStdinEof),
}

/// `stdin_eof`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct ExecStdinEof {}

/// `resize`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct ExecResize {
    /// Columns, 1..=1000.
    pub cols: u16,
    /// Rows, 1..=1000.
    pub rows: u16,
}

/// `exit`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct ExecExit {
    /// Why the session ended.
    pub reason: ExecEndReason,
    /// The command's exit status, when it exited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<i64>,
    /// For people.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

fn check_session_id(id: &str) -> Result<(), ValidationError> {
    check_required("session_id", id)?;
    check_len("session_id", id, MAX_EXEC_SESSION_ID)
}

/// Checks a terminal size field.
fn check_size(field: &str, v: Option<u16>) -> Result<(), ValidationError> {
    check_range(field, v, 1..=1000)
}

impl ExecRequest {
    /// Checks every field; errors name the field.
    pub fn validate(&self) -> Result<(), ValidationError> {
        check_session_id(&self.session_id)?;
        check_dns_label("app", &self.app)?;
        if self.cmd.is_empty() {
            return Err(ValidationError::new("cmd", "must not be empty"));
        }
        check_command("cmd", &self.cmd)?;
        check_opt_string("user", self.user.as_ref())?;
        check_size("cols", self.cols)?;
        check_size("rows", self.rows)?;
        check_required("principal", &self.principal)?;
        check_required("ticket", &self.ticket.0)?;
        check_len("ticket", &self.ticket.0, MAX_EXEC_TICKET)
    }
}

impl ExecRefused {
    /// Checks every field; errors name the field.
    pub fn validate(&self) -> Result<(), ValidationError> {
        check_session_id(&self.session_id)?;
        check_string("message", &self.message)
    }
}

impl ExecFrame {
    /// Checks every field; errors name the field.
    pub fn validate(&self) -> Result<(), ValidationError> {
        match self {
            Self::Resize(r) => {
                check_size("cols", Some(r.cols))?;
                check_size("rows", Some(r.rows))
            }
            Self::Exit(e) => check_string("message", &e.message),
            Self::StdinEof(_) => Ok(()),
        }
    }

    /// Parses and checks a text frame of the exec channel.
    pub fn decode(text: &str) -> Result<Self, ValidationError> {
        let frame: Self = serde_json::from_str(text)
            .map_err(|e| ValidationError::new("frame", format!("not an exec frame: {e}")))?;
        frame.validate()?;
        Ok(frame)
    }

    /// The frame as JSON text.
    pub fn encode(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}
