//! The audit trail of exec sessions: one `event` to the control plane and one agent log line
//! when a session starts and when it ends, naming who asked (the control plane's principal,
//! as the request gave it), the app, the session, the command, and at the end how long it
//! lasted, why it ended and the exit code. The bytes of a session are never logged.

use std::time::Duration;

use odac_protocol::{EventLevel, ExecEndReason, ExecRequest};
use tracing::{info, warn};

use crate::uplink::EventSink;

/// The command as one line: arguments joined by spaces, those with spaces or quotes or
/// control characters quoted with Rust's escapes.
pub fn command_line(cmd: &[String]) -> String {
    cmd.iter()
        .map(|a| {
            let plain = !a.is_empty()
                && a.chars()
                    .all(|c| !c.is_whitespace() && !c.is_control() && c != '"' && c != '\'');
            if plain { a.clone() } else { format!("{a:?}") }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Records that `req` started.
pub fn started(events: Option<&EventSink>, req: &ExecRequest) {
    let cmd = command_line(&req.cmd);
    info!(
        session = %req.session_id,
        principal = %req.principal,
        app = %req.app,
        tty = req.tty,
        command = %cmd,
        "exec session started"
    );
    if let Some(events) = events {
        events.push(
            EventLevel::Info,
            Some(&req.app),
            format!(
                "exec started: session {} by {} in app {}: {cmd}",
                req.session_id, req.principal, req.app
            ),
        );
    }
}

/// How a session ended, for the audit line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ending {
    /// Why.
    pub reason: ExecEndReason,
    /// The command's exit code, when it exited.
    pub code: Option<i64>,
    /// For people.
    pub message: String,
}

/// Records that `req` ended after `lasted`.
pub fn ended(events: Option<&EventSink>, req: &ExecRequest, lasted: Duration, end: &Ending) {
    let cmd = command_line(&req.cmd);
    let code = end
        .code
        .map_or_else(|| "none".to_owned(), |c| c.to_string());
    let secs = format!("{:.1}", lasted.as_secs_f64());
    let clean = end.reason == ExecEndReason::Exited;
    if clean {
        info!(session = %req.session_id, principal = %req.principal, app = %req.app,
            command = %cmd, duration_secs = %secs, exit_code = %code, reason = %end.reason,
            "exec session ended");
    } else {
        warn!(session = %req.session_id, principal = %req.principal, app = %req.app,
            command = %cmd, duration_secs = %secs, exit_code = %code, reason = %end.reason,
            "exec session ended: {}", end.message);
    }
    if let Some(events) = events {
        let why = if end.message.is_empty() {
            String::new()
        } else {
            format!(": {}", end.message)
        };
        events.push(
            if clean {
                EventLevel::Info
            } else {
                EventLevel::Warn
            },
            Some(&req.app),
            format!(
                "exec ended: session {} by {} in app {}: {cmd}; {} after {secs}s, exit code {code}{why}",
                req.session_id, req.principal, req.app, end.reason
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_lines_quote_what_needs_it() {
        let cmd: Vec<String> = ["sh", "-c", "echo out; exit 7", "a\u{1b}b"]
            .map(String::from)
            .into();
        assert_eq!(command_line(&cmd), r#"sh -c "echo out; exit 7" "a\u{1b}b""#);
    }
}
