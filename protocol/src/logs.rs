//! Live logs: the control plane asks for an app's output with `logs_request` (and stops it with
//! `logs_cancel`); the agent answers with bounded `logs_chunk` messages and one final
//! `logs_end`. None of them carries a `seq`: a log stream is a view, not state, so nothing is
//! acked, persisted or resent, and a stream never outlives the session it was asked in.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::validation::{
    ValidationError, check_dns_label, check_len, check_range, check_required, check_string,
};

/// Longest `request_id`, in bytes.
pub const MAX_LOGS_REQUEST_ID: usize = 64;
/// Most lines in one `logs_chunk`.
pub const MAX_LOGS_CHUNK_LINES: usize = 1000;
/// Longest line in a `logs_chunk`, in bytes (longer lines are cut by the agent).
pub const MAX_LOGS_LINE: usize = 4096;
/// Most lines a `logs_request` may ask for with `tail`.
pub const MAX_LOGS_TAIL: u32 = 100_000;
/// Longest stream a `logs_request` may ask for with `timeout_secs` (one day).
pub const MAX_LOGS_TIMEOUT_SECS: u32 = 86_400;

/// `logs_request`: stream the output (stdout and stderr, interleaved) of one app's container.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct LogsRequest {
    /// Chosen by the control plane, unique among its open streams to this agent; every
    /// `logs_chunk` and the `logs_end` of the stream carry it.
    pub request_id: String,
    /// The app whose container's output is wanted.
    pub app: String,
    /// Keep streaming new output until cancelled (otherwise end after what exists).
    #[serde(default)]
    pub follow: bool,
    /// Only the last `tail` lines of what exists (all of it when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tail: Option<u32>,
    /// Only output of the last `since_secs` seconds (by the agent's clock).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since_secs: Option<u64>,
    /// End the stream (`logs_end` with reason `timeout`) after this many seconds; the agent's
    /// default (10 minutes) when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<u32>,
}

/// `logs_cancel`: the viewer went away; the agent ends the stream (`logs_end`, `cancelled`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct LogsCancel {
    /// The stream to end.
    pub request_id: String,
}

/// `logs_chunk`: the next lines of a stream, oldest first, without their line ends.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct LogsChunk {
    /// The stream.
    pub request_id: String,
    /// Lines, at most [`MAX_LOGS_CHUNK_LINES`], each at most [`MAX_LOGS_LINE`] bytes.
    pub lines: Vec<String>,
    /// Lines of the stream dropped since its previous chunk (rate limit, or the link was busy).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped: u64,
}

/// `logs_end`: the stream is over; no more messages carry its `request_id`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct LogsEnd {
    /// The stream.
    pub request_id: String,
    /// Why it ended.
    pub reason: LogsEndReason,
    /// Lines dropped since the last chunk.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped: u64,
    /// For people, e.g. `app "web" has no container`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// Why a log stream ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LogsEndReason {
    /// All the output asked for was sent (no `follow`, or the container stopped).
    #[default]
    Complete,
    /// `logs_cancel` was received.
    Cancelled,
    /// The stream reached its timeout.
    Timeout,
    /// The agent is shutting down.
    Shutdown,
    /// The app is unknown or has no container.
    NotFound,
    /// Too many streams are open on this session.
    Busy,
    /// The engine failed; see `message`.
    Error,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn check_request_id(id: &str) -> Result<(), ValidationError> {
    check_required("request_id", id)?;
    check_len("request_id", id, MAX_LOGS_REQUEST_ID)
}

impl LogsRequest {
    /// Checks every field; errors name the field.
    pub fn validate(&self) -> Result<(), ValidationError> {
        check_request_id(&self.request_id)?;
        check_dns_label("app", &self.app)?;
        check_range("tail", self.tail, 0..=MAX_LOGS_TAIL)?;
        check_range("timeout_secs", self.timeout_secs, 1..=MAX_LOGS_TIMEOUT_SECS)
    }
}

impl LogsCancel {
    /// Checks every field; errors name the field.
    pub fn validate(&self) -> Result<(), ValidationError> {
        check_request_id(&self.request_id)
    }
}

impl LogsChunk {
    /// Checks every field; errors name the field (`lines[3]`).
    pub fn validate(&self) -> Result<(), ValidationError> {
        check_request_id(&self.request_id)?;
        if self.lines.len() > MAX_LOGS_CHUNK_LINES {
            return Err(ValidationError::new(
                "lines",
                format!(
                    "{} lines: at most {MAX_LOGS_CHUNK_LINES} per chunk",
                    self.lines.len()
                ),
            ));
        }
        for (i, line) in self.lines.iter().enumerate() {
            check_len(&format!("lines[{i}]"), line, MAX_LOGS_LINE)?;
        }
        Ok(())
    }
}

impl LogsEnd {
    /// Checks every field; errors name the field.
    pub fn validate(&self) -> Result<(), ValidationError> {
        check_request_id(&self.request_id)?;
        check_string("message", &self.message)
    }
}

/// Ends a live-log line that was cut (U+2026, three bytes): what followed it on that line was
/// dropped.
pub const LOGS_CUT_MARK: &str = "\u{2026}";

/// `line` as a live-log line: unchanged when it fits [`MAX_LOGS_LINE`] bytes, else cut: its
/// first bytes (at a character boundary) and [`LOGS_CUT_MARK`], [`MAX_LOGS_LINE`] bytes at
/// most.
pub fn cut_log_line(line: &str) -> std::borrow::Cow<'_, str> {
    if line.len() <= MAX_LOGS_LINE {
        return line.into();
    }
    let mut end = MAX_LOGS_LINE - LOGS_CUT_MARK.len();
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{LOGS_CUT_MARK}", &line[..end]).into()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn requests_are_checked_by_field() {
        let ok = LogsRequest {
            request_id: "r1".into(),
            app: "web".into(),
            ..LogsRequest::default()
        };
        assert!(ok.validate().is_ok());
        let bad = LogsRequest {
            tail: Some(MAX_LOGS_TAIL + 1),
            ..ok.clone()
        };
        assert_eq!(bad.validate().unwrap_err().field, "tail");
        let bad = LogsRequest {
            timeout_secs: Some(0),
            ..ok.clone()
        };
        assert_eq!(bad.validate().unwrap_err().field, "timeout_secs");
        let bad = LogsRequest {
            request_id: String::new(),
            ..ok
        };
        assert_eq!(bad.validate().unwrap_err().field, "request_id");
    }

    #[test]
    fn chunks_are_bounded() {
        let chunk = LogsChunk {
            request_id: "r".into(),
            lines: vec!["x".into(); MAX_LOGS_CHUNK_LINES + 1],
            dropped: 0,
        };
        assert_eq!(chunk.validate().unwrap_err().field, "lines");
        let chunk = LogsChunk {
            request_id: "r".into(),
            lines: vec!["ok".into(), "y".repeat(MAX_LOGS_LINE + 1)],
            dropped: 0,
        };
        assert_eq!(chunk.validate().unwrap_err().field, "lines[1]");
    }

    #[test]
    fn long_lines_are_cut_at_a_char_boundary() {
        let line = "é".repeat(MAX_LOGS_LINE);
        let cut = cut_log_line(&line);
        assert!(cut.len() <= MAX_LOGS_LINE);
        assert!(cut.len() >= MAX_LOGS_LINE - 1);
        assert!(cut.ends_with(LOGS_CUT_MARK), "a cut line is marked");
        assert_eq!(cut_log_line("short"), "short");
        let exact = "x".repeat(MAX_LOGS_LINE);
        assert_eq!(cut_log_line(&exact), exact, "a line that fits is not cut");
    }
}
