//! The conformance rules on refusals and closes (PROTOCOL.md 1.1 and 1.2): a `429`/`503`
//! upgrade answer carries a valid `Retry-After`; a second session of the same agent id
//! replaces the first, which is closed with 4000; a `hello` of an unsupported protocol
//! version and a first message that is not `hello` are answered with the documented `error`
//! and closed with 1008 — each close with the reason text of PROTOCOL.md's table.

use std::time::Duration;

use odac_protocol::{AgentMessage, ControlMessage, ErrorCode, Event, EventLevel};

use super::ConformanceConfig;
use crate::fake_agent::agent_conn::{AgentConn, ConnError, Incoming};

/// How long a control plane may take to answer or close.
const ANSWER: Duration = Duration::from_secs(5);

/// Close reasons of PROTOCOL.md 1.2.
const REPLACED: (u16, &str) = (4000, "replaced by a newer session");
const UNSUPPORTED: (u16, &str) = (1008, "unsupported protocol version");
const HELLO_EXPECTED: (u16, &str) = (1008, "hello expected");

/// Whether a `Retry-After` value is what PROTOCOL.md 1.1 asks for: delta-seconds.
fn valid_retry_after(v: &str) -> bool {
    !v.is_empty() && v.len() <= 10 && v.bytes().all(|b| b.is_ascii_digit())
}

/// A `429`/`503` answer to an upgrade must carry `Retry-After: <seconds>`. A control plane
/// that accepts the probe is not refusing for load now: nothing to check.
pub(super) async fn retry_after_when_refusing(cfg: &ConformanceConfig) -> Result<String, String> {
    let hello = AgentConn::hello(&cfg.agent_id, "conformance");
    match AgentConn::connect_hello(&cfg.url, &cfg.ca_pem, &cfg.token, hello).await {
        Ok((c, _)) => {
            c.close().await;
            Ok("the upgrade was accepted: not refusing for load now, nothing to check".to_owned())
        }
        Err(ConnError::Http {
            status: status @ (429 | 503),
            retry_after,
            ..
        }) => match retry_after {
            Some(v) if valid_retry_after(&v) => Ok(format!("http {status} with Retry-After: {v}")),
            Some(v) => Err(format!(
                "http {status} with Retry-After: {v:?}, expected a number of seconds"
            )),
            None => Err(format!("http {status} without Retry-After")),
        },
        Err(e) => Err(format!("probe upgrade failed otherwise: {e}")),
    }
}

/// Reads until the connection closes; the close code and reason.
async fn wait_close(conn: &mut AgentConn) -> Result<(Option<u16>, String), String> {
    let deadline = tokio::time::Instant::now() + ANSWER;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match conn.recv_timeout(left).await {
            Ok(_) => {}
            Err(ConnError::Closed(code)) => {
                let reason = conn
                    .closed_with()
                    .map(|(_, r)| r.to_owned())
                    .unwrap_or_default();
                return Ok((code, reason));
            }
            Err(ConnError::Timeout) => return Err("not closed within 5 s".to_owned()),
            Err(e) => return Err(format!("ended without a close frame: {e}")),
        }
    }
}

fn check_close(
    got: (Option<u16>, String),
    (code, reason): (u16, &str),
    before: &str,
) -> Result<String, String> {
    let shown = got.0.map_or_else(|| "none".to_owned(), |c| c.to_string());
    if got.0 != Some(code) || got.1 != reason {
        return Err(format!(
            "{before}closed with code {shown} reason {:?}, expected {code} {reason:?}",
            got.1
        ));
    }
    Ok(format!("{before}closed with {code} {reason:?}"))
}

/// A second session of the same agent id: the first is closed with 4000, the second goes on.
pub(super) async fn closes_a_replaced_session(cfg: &ConformanceConfig) -> Result<String, String> {
    let hello = AgentConn::hello(&cfg.agent_id, "conformance");
    let (mut first, _) = AgentConn::connect_hello(&cfg.url, &cfg.ca_pem, &cfg.token, hello.clone())
        .await
        .map_err(|e| format!("first session: {e}"))?;
    let (second, _) = AgentConn::connect_hello(&cfg.url, &cfg.ca_pem, &cfg.token, hello)
        .await
        .map_err(|e| format!("second session: {e}"))?;
    let got = wait_close(&mut first).await;
    second.close().await;
    check_close(got?, REPLACED, "the older session ")
}

/// Expects `error{code}` and then the close of `(code, reason)`.
async fn error_then_close(
    conn: &mut AgentConn,
    code: ErrorCode,
    close: (u16, &str),
) -> Result<String, String> {
    let got = conn
        .recv_until(ANSWER, |m| match m {
            Incoming::Message(ControlMessage::Error(e)) => Some(e.code.clone()),
            _ => None,
        })
        .await
        .map_err(|e| format!("no error {code} before the close: {e}"))?;
    if got != code {
        return Err(format!("answered error {got}, expected {code}"));
    }
    check_close(
        wait_close(conn).await?,
        close,
        &format!("error {code}, then "),
    )
}

/// A `hello` with an unsupported `protocol_version`: `unsupported_version`, close 1008.
pub(super) async fn closes_an_unsupported_version(
    cfg: &ConformanceConfig,
) -> Result<String, String> {
    let mut conn = AgentConn::connect_as(&cfg.url, &cfg.ca_pem, &cfg.token, Some(&cfg.agent_id))
        .await
        .map_err(|e| e.to_string())?;
    let mut hello = AgentConn::hello(&cfg.agent_id, "conformance");
    hello.protocol_version = 999;
    conn.send(&AgentMessage::Hello(hello))
        .await
        .map_err(|e| e.to_string())?;
    error_then_close(&mut conn, ErrorCode::UnsupportedVersion, UNSUPPORTED).await
}

/// A first message that is not `hello`: `invalid`, close 1008.
pub(super) async fn closes_a_session_without_hello(
    cfg: &ConformanceConfig,
) -> Result<String, String> {
    let mut conn = AgentConn::connect_as(&cfg.url, &cfg.ca_pem, &cfg.token, Some(&cfg.agent_id))
        .await
        .map_err(|e| e.to_string())?;
    let event = AgentMessage::Event(Event {
        seq: 1,
        level: EventLevel::Info,
        app: None,
        message: "conformance check: an event before hello".to_owned(),
        dropped: None,
        image_removed: None,
    });
    conn.send(&event).await.map_err(|e| e.to_string())?;
    error_then_close(&mut conn, ErrorCode::Invalid, HELLO_EXPECTED).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_close_table_of_protocol_md_says_what_the_kit_checks() {
        let doc = include_str!("../../../protocol/PROTOCOL.md");
        let liveness = (
            crate::state::liveness::CLOSE_CODE,
            crate::state::liveness::CLOSE_REASON,
        );
        for (code, reason) in [REPLACED, UNSUPPORTED, HELLO_EXPECTED, liveness] {
            let row = format!("| `{code}` | `{reason}` |");
            assert!(doc.contains(&row), "PROTOCOL.md 1.2 lacks {row}");
        }
    }

    #[test]
    fn retry_after_is_delta_seconds() {
        assert!(valid_retry_after("30"));
        assert!(valid_retry_after("0"));
        assert!(!valid_retry_after(""));
        assert!(!valid_retry_after("-1"));
        assert!(!valid_retry_after("Fri, 04 Dec 2026 13:45:48 GMT"));
        assert!(!valid_retry_after("12345678901"));
    }
}
