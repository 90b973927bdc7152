//! Agent sessions on `wss://…/agent/v1`. The upgrade checks faults (refuse → 503 with
//! `Retry-After`), the bearer
//! token (401), that the token may speak for the `odac-agent-id` it names (403, see
//! `agent_auth.rs`) and the `odac.agent.v1` subprotocol (400). A session then waits for `hello`,
//! answers `welcome`, sends the host's full `desired_state` and afterwards an `app_upsert` or
//! `app_delete` for every change; it records `inventory`, `app_status`, `event` and `error`
//! reports and acks each report's `seq` (unless a fault withholds or delays acks); a report
//! whose `seq` was recorded before is acked again and not recorded twice, and `resync` is
//! answered with a full `desired_state`. Malformed,
//! unknown or invalid frames are answered with an `error` message and the session goes on;
//! frames over the size limit — text or binary, at any stage — are answered with `too_large`
//! and closed with 1009. A session without any frame for three heartbeat intervals is closed
//! with 4001 (`liveness.rs`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::{SinkExt, StreamExt};
use odac_protocol::{
    Ack, AgentMessage, AppDelete, AppUpsert, ControlMessage, DecodeError, DesiredStateMessage,
    ErrorCode, MAX_FRAME_BYTES, PROTOCOL_VERSION, SUBPROTOCOL, UpdateOffer, Welcome, decode_agent,
};
use tokio::sync::{broadcast, mpsc};

use crate::server::api_error::ApiError;
use crate::server::ws_frames::{
    close, decode_error_frame, error_frame, is_oversize, non_text, text, too_large_frame,
};
use crate::state::hub::{ChangeKind, Hub, SessionCmd};

const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

/// Frames up to this size are read whole and refused by the codec (`too_large`, 1009); bigger
/// ones are refused by the WebSocket layer, and answered the same way.
const WS_LIMIT: usize = 16 * MAX_FRAME_BYTES;

/// The bearer token of a request, if any.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
        .map(str::trim)
}

/// `GET /agent/v1`: the WebSocket upgrade.
pub async fn upgrade(
    State(hub): State<Arc<Hub>>,
    headers: HeaderMap,
    ws: WebSocketUpgrade,
) -> Response {
    if hub.faults.refusing() {
        let mut refused = ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "agent connections are refused for now (fault injection)",
        )
        .into_response();
        if let Some(secs) = hub.faults.retry_after_secs() {
            refused
                .headers_mut()
                .insert(header::RETRY_AFTER, header::HeaderValue::from(secs));
        }
        return refused;
    }
    let Some(token) = bearer(&headers).filter(|t| hub.agent_token_ok(t)) else {
        return ApiError::new(StatusCode::UNAUTHORIZED, "missing or refused bearer token")
            .into_response();
    };
    let caller = match crate::server::agent_auth::Caller::from_upgrade(&hub, token, &headers).await
    {
        Ok(c) => c,
        Err(refused) => return refused.into_response(),
    };
    if let Some(refused) = crate::server::agent_auth::subprotocol_refusal(&headers, SUBPROTOCOL) {
        return refused;
    }
    ws.protocols([SUBPROTOCOL])
        .max_message_size(WS_LIMIT)
        .max_frame_size(WS_LIMIT)
        .on_upgrade(move |socket| session(hub, socket, caller))
}

struct Session {
    hub: Arc<Hub>,
    host: String,
    out: mpsc::UnboundedSender<Message>,
    next_seq: u64,
    seq_generation: HashMap<u64, u64>,
    sent_generation: u64,
}

impl Session {
    fn send(&self, m: Message) {
        let _ = self.out.send(m);
    }

    fn send_control(&mut self, make: impl FnOnce(u64) -> (ControlMessage, u64)) {
        self.next_seq += 1;
        let (msg, generation) = make(self.next_seq);
        self.seq_generation.insert(self.next_seq, generation);
        self.sent_generation = generation;
        self.send(text(&msg));
    }

    fn send_snapshot(&mut self) {
        let (generation, apps) = self.hub.snapshot(&self.host);
        let apps = apps
            .into_iter()
            .map(|a| self.hub.registries.attach(a))
            .collect();
        self.send_control(|seq| {
            (
                ControlMessage::DesiredState(DesiredStateMessage {
                    seq,
                    generation,
                    apps,
                }),
                generation,
            )
        });
    }

    fn ack(&self, seq: u64) {
        let Some(delay) = self.hub.faults.ack_policy() else {
            return;
        };
        let frame = text(&ControlMessage::Ack(Ack { seq }));
        if delay.is_zero() {
            self.send(frame);
        } else {
            let out = self.out.clone();
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                let _ = out.send(frame);
            });
        }
    }

    fn on_frame(&mut self, frame: &[u8]) -> bool {
        let msg = match decode_agent(frame) {
            Ok(m) => m,
            Err(e) => {
                self.send(decode_error_frame(&e, frame));
                if matches!(e, DecodeError::TooLarge { .. }) {
                    self.send(close(1009, "frame too large"));
                    return false;
                }
                return true;
            }
        };
        self.hub.seen(&self.host);
        let seq = msg.seq();
        if let Some(seq) = seq
            && !self.hub.dedup.first_time(&self.host, seq)
        {
            // a resend of a report already recorded: ack it again, record nothing
            self.ack(seq);
            return true;
        }
        match msg {
            AgentMessage::Hello(_) => {
                self.send(error_frame(
                    ErrorCode::Conflict,
                    "type: hello was already received in this session".to_owned(),
                    None,
                ));
                return true;
            }
            AgentMessage::Inventory(m) => self.hub.record_inventory(&self.host, m.inventory),
            AgentMessage::AppStatus(m) => self.hub.record_status(&self.host, m.status),
            AgentMessage::Event(e) => self.hub.record_event(&self.host, &e),
            AgentMessage::Ack(a) => {
                if let Some(g) = self.seq_generation.remove(&a.seq) {
                    self.hub.record_ack(&self.host, g);
                }
            }
            AgentMessage::Error(e) => self
                .hub
                .record_agent_error(&self.host, &format!("{}: {}", e.code, e.message)),
            AgentMessage::Resync(r) => {
                tracing::info!(host = %self.host, reason = %r.reason, "agent asked for a resync");
                self.send_snapshot();
            }
            AgentMessage::LogsChunk(c) => self.hub.logs.chunk(&self.host, c),
            AgentMessage::LogsEnd(e) => self.hub.logs.end(&self.host, e),
            AgentMessage::GpuStats(m) => self.hub.record_gpu_stats(&self.host, m.stats),
            AgentMessage::UpdateStatus(m) => self.hub.record_update(&self.host, m),
            AgentMessage::ExecRefused(r) => self.hub.exec.refused(&self.host, r),
        }
        if let Some(seq) = seq {
            self.ack(seq);
        }
        true
    }
}

/// Reads the first frame; it must be a valid `hello` of protocol version 1.
async fn read_hello(
    stream: &mut futures_util::stream::SplitStream<WebSocket>,
    out: &mpsc::UnboundedSender<Message>,
) -> Option<odac_protocol::Hello> {
    let frame = match tokio::time::timeout(HELLO_TIMEOUT, stream.next()).await {
        Ok(Some(Ok(Message::Text(t)))) => t,
        Ok(Some(Ok(Message::Binary(b)))) => {
            if non_text(out, b.len()) {
                let _ = out.send(close(1003, "binary frames are not supported"));
            }
            return None;
        }
        Ok(Some(Err(e))) if is_oversize(&e) => {
            let _ = out.send(too_large_frame(None));
            let _ = out.send(close(1009, "frame too large"));
            return None;
        }
        Err(_) => {
            let _ = out.send(close(1008, "no hello within 10 s"));
            return None;
        }
        _ => return None,
    };
    let bytes = frame.as_bytes();
    match decode_agent(bytes) {
        Ok(AgentMessage::Hello(h)) if h.protocol_version == PROTOCOL_VERSION => Some(h),
        Ok(AgentMessage::Hello(h)) => {
            let _ = out.send(error_frame(
                ErrorCode::UnsupportedVersion,
                format!(
                    "protocol_version: {} is not supported (this control plane speaks {PROTOCOL_VERSION})",
                    h.protocol_version
                ),
                None,
            ));
            let _ = out.send(close(1008, "unsupported protocol version"));
            None
        }
        Ok(other) => {
            let _ = out.send(error_frame(
                ErrorCode::Invalid,
                format!(
                    "type: the first message must be hello, got {}",
                    other.type_name()
                ),
                other.seq(),
            ));
            let _ = out.send(close(1008, "hello expected"));
            None
        }
        Err(e) => {
            let _ = out.send(decode_error_frame(&e, bytes));
            if matches!(e, DecodeError::TooLarge { .. }) {
                let _ = out.send(close(1009, "frame too large"));
            } else {
                let _ = out.send(close(1008, "hello expected"));
            }
            None
        }
    }
}

async fn session(hub: Arc<Hub>, socket: WebSocket, caller: crate::server::agent_auth::Caller) {
    let (mut sink, mut stream) = socket.split();
    let (out, mut out_rx) = mpsc::unbounded_channel::<Message>();
    let faults_hub = Arc::clone(&hub);
    let writer = tokio::spawn(async move {
        while let Some(mut m) = out_rx.recv().await {
            let is_close = matches!(m, Message::Close(_));
            if is_close && faults_hub.faults.wrong_close_codes() {
                m = close(1000, "closed");
            }
            if sink.send(m).await.is_err() || is_close {
                break;
            }
        }
        let _ = sink.close().await;
    });

    let hello = match read_hello(&mut stream, &out).await {
        Some(h) => caller.check_hello(&hub, h, &out).await,
        None => None,
    };
    let Some(hello) = hello else {
        drop(out);
        let _ = tokio::time::timeout(Duration::from_secs(1), writer).await;
        return;
    };
    let host = hub.hello(&hello);
    let session_id = format!("sess_{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
    // the session is registered (and its change feed subscribed) before the welcome: an
    // agent that has its welcome is one the API can reach, with no window in between
    let (cmd_tx, mut cmd_rx) = mpsc::unbounded_channel();
    let mut changes = hub.subscribe_changes();
    hub.register_session(&host, &session_id, cmd_tx);
    let _ = out.send(text(&ControlMessage::Welcome(Welcome {
        host_id: host.clone(),
        session_id: Some(session_id.clone()),
        heartbeat_secs: Some(hub.heartbeat_secs),
    })));

    let mut s = Session {
        hub: Arc::clone(&hub),
        host: host.clone(),
        out,
        next_seq: 0,
        seq_generation: HashMap::new(),
        sent_generation: 0,
    };
    s.send_snapshot();

    let mut dropped = false;
    let mut live = crate::state::liveness::Liveness::new(hub.heartbeat_secs);
    loop {
        tokio::select! {
            frame = stream.next() => match frame {
                Some(Ok(Message::Text(t))) => {
                    live.heard();
                    if !s.on_frame(t.as_bytes()) {
                        break;
                    }
                }
                Some(Ok(Message::Binary(b))) => {
                    live.heard();
                    if !non_text(&s.out, b.len()) {
                        break;
                    }
                }
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => {
                    live.heard();
                    hub.seen(&host);
                }
                Some(Ok(Message::Close(_))) | None => break,
                Some(Err(e)) => {
                    if is_oversize(&e) {
                        s.send(too_large_frame(None));
                        s.send(close(1009, "frame too large"));
                    }
                    tracing::debug!(%host, error = %e, "agent session read failed");
                    break;
                }
            },
            () = tokio::time::sleep_until(live.deadline()) => {
                tracing::warn!(%host, "agent missed its heartbeats; closing the session");
                hub.record_dead_session(&host, live.window());
                s.send(close(crate::state::liveness::CLOSE_CODE, crate::state::liveness::CLOSE_REASON));
                break;
            }
            cmd = cmd_rx.recv() => match cmd {
                Some(SessionCmd::Drop) | None => {
                    dropped = true;
                    break;
                }
                Some(SessionCmd::Close(code, reason)) => {
                    s.send(close(code, &reason));
                    break;
                }
                Some(SessionCmd::SendRaw(frame)) => s.send(Message::Text(frame.into())),
                Some(SessionCmd::OfferUpdate(release)) => {
                    s.next_seq += 1;
                    let seq = s.next_seq;
                    s.send(text(&ControlMessage::UpdateOffer(UpdateOffer { seq, release })));
                }
            },
            change = changes.recv() => match change {
                Ok(c) if c.host == host && c.generation > s.sent_generation => {
                    let generation = c.generation;
                    s.send_control(|seq| match c.kind {
                        ChangeKind::Upsert(app) => (
                            ControlMessage::AppUpsert(AppUpsert {
                                seq,
                                generation,
                                app: hub.registries.attach(app),
                            }),
                            generation,
                        ),
                        ChangeKind::Delete(name) => (
                            ControlMessage::AppDelete(AppDelete { seq, generation, name }),
                            generation,
                        ),
                    });
                }
                Ok(_) => {}
                Err(broadcast::error::RecvError::Lagged(_)) => s.send_snapshot(),
                Err(broadcast::error::RecvError::Closed) => break,
            },
        }
    }
    hub.unregister_session(&host, &session_id);
    hub.logs.session_ended(&host, &session_id);
    drop(s);
    if dropped {
        writer.abort();
    } else {
        let _ = tokio::time::timeout(Duration::from_secs(1), writer).await;
    }
}
