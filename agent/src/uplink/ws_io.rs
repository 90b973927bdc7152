//! Writing to a session's WebSocket: every send bounded by two heartbeat intervals (a blocked
//! send ends the session as [`Lost`]), the outbox flushed as one batch, the `too_large` answer
//! before a 1009 close, the close handshake, and the reasons a session ends that come from the
//! socket itself.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use odac_protocol::{AgentMessage, ErrorCode, ErrorMessage, MAX_FRAME_BYTES, encode};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tracing::debug;

use super::connect::WsStream;
use super::outbox::Outbox;
use odac_host::lock::lock;

/// How long to wait for the peer's close frame.
pub(super) const CLOSE_WAIT: Duration = Duration::from_secs(1);

/// The link is gone, and why (for the log).
pub(super) struct Lost(pub(super) String);

/// Sends every unsent report.
pub(super) async fn flush(
    ws: &mut WsStream,
    outbox: &Arc<Mutex<Outbox>>,
    interval: Duration,
) -> Result<(), Lost> {
    let batch = lock(outbox).take_unsent();
    if batch.is_empty() {
        return Ok(());
    }
    for msg in &batch {
        let frame = Message::text(encode(msg));
        tokio::time::timeout(interval * 2, ws.feed(frame))
            .await
            .map_err(|_| Lost("sending reports timed out".into()))?
            .map_err(|e| Lost(format!("sending reports failed: {e}")))?;
    }
    tokio::time::timeout(interval * 2, ws.flush())
        .await
        .map_err(|_| Lost("sending reports timed out".into()))?
        .map_err(|e| Lost(format!("sending reports failed: {e}")))?;
    debug!(reports = batch.len(), "reports sent");
    Ok(())
}

pub(super) async fn send(ws: &mut WsStream, msg: Message, interval: Duration) -> Result<(), Lost> {
    match tokio::time::timeout(interval * 2, ws.send(msg)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(Lost(format!("send failed: {e}"))),
        Err(_) => Err(Lost(format!(
            "send blocked for {}s",
            (interval * 2).as_secs()
        ))),
    }
}

/// Sends one message as a JSON text frame.
pub(super) async fn send_msg(
    ws: &mut WsStream,
    msg: &AgentMessage,
    interval: Duration,
) -> Result<(), Lost> {
    send(ws, Message::text(encode(msg)), interval).await
}

/// Tells the control plane why (`error{code:"too_large"}`, best effort), then closes with 1009.
pub(super) async fn refuse_oversize(ws: &mut WsStream, reason: &str, interval: Duration) {
    let msg = ErrorMessage::new(ErrorCode::TooLarge, reason.to_string(), None);
    if let Err(e) = send(
        ws,
        Message::text(encode(&AgentMessage::Error(msg))),
        interval,
    )
    .await
    {
        debug!("could not report the oversize frame: {}", e.0);
    }
    close(ws, CloseCode::Size, "frame too large").await;
}

/// Sends a close frame and waits briefly for the peer's.
pub(super) async fn close(ws: &mut WsStream, code: CloseCode, reason: &'static str) {
    let frame = CloseFrame {
        code,
        reason: reason.into(),
    };
    let _ = tokio::time::timeout(CLOSE_WAIT, async {
        if ws.close(Some(frame)).await.is_ok() {
            while let Some(Ok(m)) = ws.next().await {
                if matches!(m, Message::Close(_)) {
                    break;
                }
            }
        }
    })
    .await;
}

pub(super) fn closed_reason(frame: Option<&CloseFrame>) -> String {
    match frame {
        Some(f) => format!(
            "control plane closed the session (code {}{}{})",
            u16::from(f.code),
            if f.reason.is_empty() { "" } else { ": " },
            f.reason.as_str()
        ),
        None => "control plane closed the session".into(),
    }
}

pub(super) fn too_large(size: usize) -> String {
    format!("refused a frame of {size} bytes (limit {MAX_FRAME_BYTES}); closed with 1009")
}
