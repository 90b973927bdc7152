//! Frames from the control plane during a session: the socket's own frames (pong, close,
//! binary, oversize) handled first, then each text frame decoded: acks clear the outbox, live-log
//! requests go to the session's streams, exec requests to the exec service, state-changing messages queue for the app manager, and
//! a frame that does not decode is answered with an `error` (a refused change puts the agent out
//! of step, like a refused apply).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::SinkExt;
use odac_protocol::{
    AgentMessage, ControlMessage, DecodeError, ErrorCode, ErrorMessage, ExecEndReason, ExecRefused,
    MAX_FRAME_BYTES, decode_control,
};
use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};
use tracing::{debug, warn};

use super::apply::Outcome;
use super::connect::WsStream;
use super::control::ApplyError;
use super::heartbeat::Heartbeat;
use super::logs::LogSessions;
use super::outbox::Outbox;
use super::ws_io::{CLOSE_WAIT, Lost, closed_reason, refuse_oversize, send_msg, too_large};
use odac_host::lock::lock;

/// What a frame arrived on, besides the socket: where its effects go.
pub(super) struct Inbox<'a> {
    pub(super) heartbeat: &'a mut Heartbeat,
    pub(super) outbox: &'a Arc<Mutex<Outbox>>,
    pub(super) queued: &'a mut VecDeque<ControlMessage>,
    pub(super) logs: &'a mut LogSessions,
    pub(super) updates: Option<&'a super::UpdateOffers>,
    pub(super) exec: Option<&'a Arc<super::exec::ExecService>>,
}

/// Handles one frame; a change refused because it did not validate comes back as its outcome.
pub(super) async fn on_frame(
    ws: &mut WsStream,
    frame: Option<Result<Message, tokio_tungstenite::tungstenite::Error>>,
    inbox: Inbox<'_>,
    interval: Duration,
) -> Result<Option<Outcome>, Lost> {
    let Some(text) = text_of(ws, frame, inbox.heartbeat, interval).await? else {
        return Ok(None);
    };
    if text.len() > MAX_FRAME_BYTES {
        let reason = too_large(text.len());
        refuse_oversize(ws, &reason, interval).await;
        return Err(Lost(reason));
    }
    match decode_control(text.as_bytes()) {
        Ok(ControlMessage::Ack(a)) => {
            lock(inbox.outbox).ack(a.seq);
            Ok(None)
        }
        Ok(ControlMessage::Welcome(_)) => {
            debug!("ignoring a second welcome");
            Ok(None)
        }
        Ok(ControlMessage::Error(e)) => {
            warn!(
                code = %e.code,
                ref_seq = ?e.ref_seq,
                "control plane refused a message: {}",
                e.message
            );
            Ok(None)
        }
        Ok(ControlMessage::LogsRequest(r)) => {
            inbox.logs.request(r);
            Ok(None)
        }
        Ok(ControlMessage::LogsCancel(c)) => match inbox.logs.cancel(&c.request_id) {
            Some(end) => send_msg(ws, &AgentMessage::LogsEnd(end), interval)
                .await
                .map(|()| None),
            None => Ok(None),
        },
        Ok(ControlMessage::UpdateOffer(o)) => {
            let seq = o.seq;
            let taken = inbox.updates.map(|tx| tx.try_send(o));
            let reply = match taken {
                Some(Ok(())) => AgentMessage::Ack(odac_protocol::Ack { seq }),
                Some(Err(_)) => update_refusal(seq, "an update is already in progress"),
                None => update_refusal(seq, "self-update is not available in this agent"),
            };
            send_msg(ws, &reply, interval).await.map(|()| None)
        }
        Ok(ControlMessage::ExecRequest(r)) => {
            let refusal = match inbox.exec {
                Some(service) => service.request(r),
                None => Some(ExecRefused {
                    session_id: r.session_id,
                    reason: ExecEndReason::Disabled,
                    message: "this agent serves no exec sessions".into(),
                }),
            };
            match refusal {
                Some(refusal) => send_msg(ws, &AgentMessage::ExecRefused(refusal), interval)
                    .await
                    .map(|()| None),
                None => Ok(None),
            }
        }
        Ok(m) => {
            inbox.queued.push_back(m);
            Ok(None)
        }
        Err(e) => {
            refuse(ws, &e, text.as_bytes(), interval).await?;
            Ok(refused_change(&e, text.as_bytes()))
        }
    }
}

/// The `error` refusing the `update_offer` with `seq`.
fn update_refusal(seq: u64, why: &str) -> AgentMessage {
    AgentMessage::Error(ErrorMessage::new(
        ErrorCode::Conflict,
        format!("update_offer: {why}"),
        Some(seq),
    ))
}

/// The text of a frame; every other frame is handled here (`None`: nothing more to do).
async fn text_of(
    ws: &mut WsStream,
    frame: Option<Result<Message, tokio_tungstenite::tungstenite::Error>>,
    heartbeat: &mut Heartbeat,
    interval: Duration,
) -> Result<Option<Utf8Bytes>, Lost> {
    use tokio_tungstenite::tungstenite::Error as WsError;
    match frame {
        Some(Ok(Message::Text(t))) => Ok(Some(t)),
        Some(Ok(Message::Binary(b))) => {
            let msg = ErrorMessage::new(
                ErrorCode::Malformed,
                format!(
                    "binary frame of {} bytes: only json text frames are accepted",
                    b.len()
                ),
                None,
            );
            send_msg(ws, &AgentMessage::Error(msg), interval)
                .await
                .map(|()| None)
        }
        Some(Ok(Message::Pong(_))) => {
            heartbeat.pong();
            Ok(None)
        }
        Some(Ok(Message::Ping(_) | Message::Frame(_))) => Ok(None),
        Some(Ok(Message::Close(f))) => {
            // the close reply is queued by tungstenite; push it out
            let _ = tokio::time::timeout(CLOSE_WAIT, ws.flush()).await;
            Err(Lost(closed_reason(f.as_ref())))
        }
        Some(Err(WsError::Capacity(e))) => {
            let reason = format!("refused a frame over the size limit: {e}");
            refuse_oversize(ws, &reason, interval).await;
            Err(Lost(reason))
        }
        Some(Err(e)) => Err(Lost(format!("websocket error: {e}"))),
        None => Err(Lost("connection closed by the control plane".into())),
    }
}

/// Answers a frame that could not be decoded with an `error`; the session goes on.
pub(super) async fn refuse(
    ws: &mut WsStream,
    e: &DecodeError,
    frame: &[u8],
    interval: Duration,
) -> Result<(), Lost> {
    let ref_seq = sniff_seq(frame);
    warn!(code = %e.code(), ref_seq = ?ref_seq, "refused a control-plane frame: {e}");
    // `<field>: <problem>`, without the decoder's prefix
    let msg = odac_protocol::error_reply(frame, e)
        .unwrap_or_else(|| ErrorMessage::new(e.code(), e.to_string(), ref_seq));
    send_msg(ws, &AgentMessage::Error(msg), interval).await
}

/// A state-changing message (`desired_state`, `app_upsert`, `app_delete`) refused because it
/// did not validate: like a refused apply, it puts the agent out of step.
fn refused_change(e: &DecodeError, frame: &[u8]) -> Option<Outcome> {
    if !matches!(e, DecodeError::Invalid(_)) {
        return None;
    }
    let value = serde_json::from_slice::<serde_json::Value>(frame).ok()?;
    let snapshot = match value.get("type")?.as_str()? {
        "desired_state" => true,
        "app_upsert" | "app_delete" => false,
        _ => return None,
    };
    Some(Outcome {
        seq: value.get("seq")?.as_u64()?,
        snapshot,
        result: Err(ApplyError::new(e.code(), e.to_string())),
    })
}

/// The `seq` of a frame that failed to decode, when it has a numeric one.
fn sniff_seq(frame: &[u8]) -> Option<u64> {
    serde_json::from_slice::<serde_json::Value>(frame)
        .ok()?
        .get("seq")?
        .as_u64()
}
