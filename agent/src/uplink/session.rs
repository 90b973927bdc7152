//! One WebSocket session, from `hello` to its end. After the `welcome` the agent sends its
//! full inventory and the status of every app (through the outbox, so everything unacked from
//! earlier sessions is resent too), then serves frames until the link dies: desired state,
//! upserts and deletes go to the app manager one at a time and are acked only once it has
//! persisted them; acks clear the outbox; bad frames are answered with an `error` and the
//! session goes on; frames over the size limit are answered with `too_large` and close the
//! session with 1009; a ping unanswered for two intervals ends it. A refused change puts the
//! agent out of step: incremental changes are refused and a `resync` asks for a snapshot
//! ([`super::resync`]). Shutdown finishes the change being persisted, then closes 1001.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use odac_protocol::{
    Ack, AgentMessage, ControlMessage, DecodeError, ErrorCode, ErrorMessage, Hello,
    MAX_FRAME_BYTES, Resync, decode_control, encode,
};
use tokio::sync::{Notify, broadcast};
use tokio::time::{Instant, MissedTickBehavior};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::connect::WsStream;
use super::control::{AppControl, ApplyError};
use super::heartbeat::{Beat, Heartbeat};
use super::logs::{LogSessions, LogSource};
use super::outbox::Outbox;
use super::resync::{ResyncState, is_incremental};
use super::{LinkEvent, lock};
use crate::liveness::{Heartbeat as LoopBeat, IDLE_STAMP};

/// How long shutdown waits for the change being persisted before closing anyway.
const SHUTDOWN_APPLY_GRACE: Duration = Duration::from_secs(3);
/// How long to wait for the peer's close frame.
const CLOSE_WAIT: Duration = Duration::from_secs(1);

/// How a session ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionEnd {
    /// Shutdown was requested; the session was closed with 1001.
    Shutdown,
    /// The control plane answered `hello` with an `unauthorized` error.
    Unauthorized(String),
    /// The link is gone; reconnect.
    Lost {
        /// Why, for the log.
        reason: String,
        /// How long the session had been established (since `welcome`), if it was.
        healthy_for: Option<Duration>,
    },
}

/// What a session works with; owned by the uplink and lent to each session.
pub(crate) struct SessionCtx<'a> {
    pub apps: &'a Arc<dyn AppControl>,
    pub outbox: &'a Arc<Mutex<Outbox>>,
    pub wake: &'a Notify,
    pub latest_inventory: Option<odac_protocol::Inventory>,
    pub hello: Hello,
    pub heartbeat: Duration,
    pub welcome_timeout: Duration,
    pub shutdown: &'a CancellationToken,
    pub link_events: &'a broadcast::Sender<LinkEvent>,
    pub resync: &'a ResyncState,
    /// Stamped on every turn of the session loop and every idle second.
    pub beat: &'a LoopBeat,
    /// Where live logs come from (`None`: every `logs_request` ends with `not_found`).
    pub logs: Option<Arc<LogSource>>,
}

/// A change applied (or refused) by the app manager.
struct Outcome {
    seq: u64,
    /// A full `desired_state` (not an upsert or delete).
    snapshot: bool,
    result: Result<(), ApplyError>,
}

type ApplyFuture = Pin<Box<dyn Future<Output = Outcome> + Send>>;

/// A `resync` to send at `at`.
struct PendingResync {
    at: Instant,
    reason: String,
}

struct Lost(String);

/// Runs one session on an established WebSocket.
pub(crate) async fn run_session(mut ws: WsStream, ctx: SessionCtx<'_>) -> SessionEnd {
    let mut queued: VecDeque<ControlMessage> = VecDeque::new();
    let welcome = match handshake(&mut ws, &ctx, &mut queued).await {
        Ok(w) => w,
        Err(end) => return end,
    };
    let established = Instant::now();
    let lost = |reason: String| SessionEnd::Lost {
        reason,
        healthy_for: Some(established.elapsed()),
    };
    let interval = welcome
        .heartbeat_secs
        .map(|s| Duration::from_secs(u64::from(s)))
        .unwrap_or(ctx.heartbeat);
    info!(
        host_id = %welcome.host_id,
        session = welcome.session_id.as_deref().unwrap_or("-"),
        heartbeat_secs = interval.as_secs(),
        "control plane session established"
    );
    let _ = ctx.link_events.send(LinkEvent::Connected);

    // full inventory, then every app's status, then whatever is still unacked
    {
        let mut outbox = lock(ctx.outbox);
        outbox.new_session();
        if let Some(inv) = ctx.latest_inventory.clone() {
            outbox.put_inventory(inv);
        }
        for status in ctx.apps.statuses() {
            outbox.put_status(status);
        }
    }
    if let Err(Lost(reason)) = flush(&mut ws, ctx.outbox, interval).await {
        return lost(reason);
    }

    let mut heartbeat = Heartbeat::new(interval);
    let mut ticker = tokio::time::interval_at(Instant::now() + interval, interval);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut applying: Option<ApplyFuture> = None;
    let mut resync: Option<PendingResync> = None;

    let mut idle = tokio::time::interval(IDLE_STAMP);
    idle.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut logs = LogSessions::new(ctx.logs.clone());

    loop {
        ctx.beat.stamp();
        while applying.is_none() {
            let Some(m) = queued.pop_front() else { break };
            if ctx.resync.awaiting() && is_incremental(&m) {
                if let Err(Lost(reason)) = refuse_out_of_step(&mut ws, &m, interval).await {
                    return lost(reason);
                }
                continue;
            }
            applying = start_apply(ctx.apps, m);
        }
        let resync_at = resync.as_ref().map(|r| r.at);
        tokio::select! {
            biased;
            () = ctx.shutdown.cancelled() => {
                return shutdown(&mut ws, applying, interval, logs.shut_down()).await;
            }
            outcome = poll_apply(&mut applying) => {
                applying = None;
                if let Some(next) = after_apply(ctx.resync, &outcome) {
                    resync = Some(next);
                } else if outcome.snapshot && outcome.result.is_ok() {
                    resync = None;
                }
                if let Err(Lost(reason)) = answer_apply(&mut ws, outcome, interval).await {
                    return lost(reason);
                }
            }
            () = sleep_until_opt(resync_at) => {
                if let Some(r) = resync.take() {
                    let msg = AgentMessage::Resync(Resync {
                        reason: r.reason,
                        last_generation: ctx.apps.generation(),
                    });
                    info!("asking the control plane for a full desired state (resync)");
                    if let Err(Lost(reason)) = send(&mut ws, Message::text(encode(&msg)), interval).await {
                        return lost(reason);
                    }
                }
            }
            frame = ws.next() => {
                let step = on_frame(&mut ws, frame, &mut heartbeat, ctx.outbox, &mut queued, &mut logs, interval).await;
                if let Ok(Some(refused)) = &step {
                    resync = after_apply(ctx.resync, refused).or(resync);
                }
                if let Err(Lost(reason)) = step {
                    return lost(reason);
                }
            }
            _ = ticker.tick() => match heartbeat.tick(Instant::now()) {
                Beat::Ping => {
                    debug!("heartbeat ping");
                    if let Err(Lost(reason)) = send(&mut ws, Message::Ping(Vec::new().into()), interval).await {
                        return lost(reason);
                    }
                }
                Beat::Dead { silent_for } => {
                    return lost(format!("no pong for {}s (two heartbeat intervals)", silent_for.as_secs_f64().round()));
                }
            },
            () = ctx.wake.notified() => {
                if let Err(Lost(reason)) = flush(&mut ws, ctx.outbox, interval).await {
                    return lost(reason);
                }
            }
            // after every report: log output never delays a status
            msg = logs.next() => {
                if let Err(Lost(reason)) = send(&mut ws, Message::text(encode(&msg)), interval).await {
                    return lost(reason);
                }
            }
            _ = idle.tick() => {}
        }
    }
}

/// Sends `hello` and waits for `welcome`. State-changing messages that arrive first are kept.
async fn handshake(
    ws: &mut WsStream,
    ctx: &SessionCtx<'_>,
    queued: &mut VecDeque<ControlMessage>,
) -> Result<odac_protocol::Welcome, SessionEnd> {
    let early = |reason: String| SessionEnd::Lost {
        reason,
        healthy_for: None,
    };
    let hello = AgentMessage::Hello(ctx.hello.clone());
    send(ws, Message::text(encode(&hello)), ctx.welcome_timeout)
        .await
        .map_err(|Lost(r)| early(r))?;
    let deadline = Instant::now() + ctx.welcome_timeout;
    loop {
        let frame = tokio::select! {
            () = ctx.shutdown.cancelled() => {
                close(ws, CloseCode::Away, "agent shutting down").await;
                return Err(SessionEnd::Shutdown);
            }
            f = tokio::time::timeout_at(deadline, ws.next()) => match f {
                Ok(f) => f,
                Err(_) => return Err(early(format!(
                    "no welcome within {}s of hello", ctx.welcome_timeout.as_secs()
                ))),
            },
        };
        let text = match frame {
            Some(Ok(Message::Text(t))) => t,
            Some(Ok(Message::Close(f))) => return Err(early(closed_reason(f.as_ref()))),
            Some(Ok(_)) => continue,
            Some(Err(e)) => return Err(early(format!("websocket error before welcome: {e}"))),
            None => return Err(early("connection closed before welcome".into())),
        };
        if text.len() > MAX_FRAME_BYTES {
            close(ws, CloseCode::Size, "frame too large").await;
            return Err(early(too_large(text.len())));
        }
        match decode_control(text.as_bytes()) {
            Ok(ControlMessage::Welcome(w)) => return Ok(w),
            Ok(ControlMessage::Error(e)) if e.code == ErrorCode::Unauthorized => {
                return Err(SessionEnd::Unauthorized(e.message));
            }
            Ok(ControlMessage::Error(e)) => {
                return Err(early(format!(
                    "control plane refused hello: {}: {}",
                    e.code, e.message
                )));
            }
            Ok(ControlMessage::Ack(_)) => {}
            Ok(m) => queued.push_back(m),
            Err(e) => {
                refuse(ws, &e, text.as_bytes(), ctx.welcome_timeout)
                    .await
                    .map_err(|Lost(r)| early(r))?;
            }
        }
    }
}

async fn on_frame(
    ws: &mut WsStream,
    frame: Option<Result<Message, tokio_tungstenite::tungstenite::Error>>,
    heartbeat: &mut Heartbeat,
    outbox: &Arc<Mutex<Outbox>>,
    queued: &mut VecDeque<ControlMessage>,
    logs: &mut LogSessions,
    interval: Duration,
) -> Result<Option<Outcome>, Lost> {
    use tokio_tungstenite::tungstenite::Error as WsError;
    let text = match frame {
        Some(Ok(Message::Text(t))) => t,
        Some(Ok(Message::Binary(b))) => {
            let msg = ErrorMessage::new(
                ErrorCode::Malformed,
                format!(
                    "binary frame of {} bytes: only json text frames are accepted",
                    b.len()
                ),
                None,
            );
            return send(
                ws,
                Message::text(encode(&AgentMessage::Error(msg))),
                interval,
            )
            .await
            .map(|()| None);
        }
        Some(Ok(Message::Pong(_))) => {
            heartbeat.pong();
            return Ok(None);
        }
        Some(Ok(Message::Ping(_) | Message::Frame(_))) => return Ok(None),
        Some(Ok(Message::Close(f))) => {
            // the close reply is queued by tungstenite; push it out
            let _ = tokio::time::timeout(CLOSE_WAIT, ws.flush()).await;
            return Err(Lost(closed_reason(f.as_ref())));
        }
        Some(Err(WsError::Capacity(e))) => {
            let reason = format!("refused a frame over the size limit: {e}");
            refuse_oversize(ws, &reason, interval).await;
            return Err(Lost(reason));
        }
        Some(Err(e)) => return Err(Lost(format!("websocket error: {e}"))),
        None => return Err(Lost("connection closed by the control plane".into())),
    };
    if text.len() > MAX_FRAME_BYTES {
        let reason = too_large(text.len());
        refuse_oversize(ws, &reason, interval).await;
        return Err(Lost(reason));
    }
    match decode_control(text.as_bytes()) {
        Ok(ControlMessage::Ack(a)) => {
            lock(outbox).ack(a.seq);
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
            logs.request(r);
            Ok(None)
        }
        Ok(ControlMessage::LogsCancel(c)) => match logs.cancel(&c.request_id) {
            Some(end) => send(
                ws,
                Message::text(encode(&AgentMessage::LogsEnd(end))),
                interval,
            )
            .await
            .map(|()| None),
            None => Ok(None),
        },
        Ok(m) => {
            queued.push_back(m);
            Ok(None)
        }
        Err(e) => {
            refuse(ws, &e, text.as_bytes(), interval).await?;
            Ok(refused_change(&e, text.as_bytes()))
        }
    }
}

/// Answers a frame that could not be decoded with an `error`; the session goes on.
async fn refuse(
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
    send(
        ws,
        Message::text(encode(&AgentMessage::Error(msg))),
        interval,
    )
    .await
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

fn start_apply(apps: &Arc<dyn AppControl>, msg: ControlMessage) -> Option<ApplyFuture> {
    let apps = Arc::clone(apps);
    match msg {
        ControlMessage::DesiredState(m) => {
            let seq = m.seq;
            info!(
                seq,
                generation = m.generation,
                apps = m.apps.len(),
                "desired state received"
            );
            Some(Box::pin(async move {
                let result = apps.set_desired(m.into_state()).await;
                Outcome {
                    seq,
                    snapshot: true,
                    result,
                }
            }))
        }
        ControlMessage::AppUpsert(m) => {
            info!(seq = m.seq, generation = m.generation, app = %m.app.name, "app upsert received");
            Some(Box::pin(async move {
                let result = apps.upsert(m.generation, m.app).await;
                Outcome {
                    seq: m.seq,
                    snapshot: false,
                    result,
                }
            }))
        }
        ControlMessage::AppDelete(m) => {
            info!(seq = m.seq, generation = m.generation, app = %m.name, "app delete received");
            Some(Box::pin(async move {
                let result = apps.delete(m.generation, m.name).await;
                Outcome {
                    seq: m.seq,
                    snapshot: false,
                    result,
                }
            }))
        }
        ControlMessage::Welcome(_)
        | ControlMessage::Ack(_)
        | ControlMessage::Error(_)
        | ControlMessage::LogsRequest(_)
        | ControlMessage::LogsCancel(_) => None,
    }
}

async fn poll_apply(applying: &mut Option<ApplyFuture>) -> Outcome {
    match applying {
        Some(f) => f.await,
        None => std::future::pending().await,
    }
}

async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

/// Updates the resync state after a change; the `resync` to send when it was refused.
fn after_apply(state: &ResyncState, outcome: &Outcome) -> Option<PendingResync> {
    match &outcome.result {
        Ok(()) => {
            if outcome.snapshot {
                state.snapshot_applied();
            }
            None
        }
        Err(e) => {
            let delay = state.refused(outcome.snapshot);
            Some(PendingResync {
                at: Instant::now() + delay,
                reason: format!("seq {}: {}: {}", outcome.seq, e.code, e.message),
            })
        }
    }
}

/// Refuses an incremental change while the agent waits for a snapshot.
async fn refuse_out_of_step(
    ws: &mut WsStream,
    msg: &ControlMessage,
    interval: Duration,
) -> Result<(), Lost> {
    let seq = msg.seq();
    warn!(
        seq = ?seq,
        "{} not applied: waiting for a full desired state after a refused change",
        msg.type_name()
    );
    let err = ErrorMessage::new(
        ErrorCode::Conflict,
        "seq: not applied: the agent is out of step after a refused change and waits for a full desired_state (resync requested)",
        seq,
    );
    send(
        ws,
        Message::text(encode(&AgentMessage::Error(err))),
        interval,
    )
    .await
}

async fn answer_apply(ws: &mut WsStream, outcome: Outcome, interval: Duration) -> Result<(), Lost> {
    let seq = outcome.seq;
    let msg = match outcome.result {
        Ok(()) => AgentMessage::Ack(Ack { seq }),
        Err(e) => {
            warn!(seq, code = %e.code, "desired-state change refused: {}", e.message);
            AgentMessage::Error(ErrorMessage::new(e.code, e.message, Some(seq)))
        }
    };
    send(ws, Message::text(encode(&msg)), interval).await
}

async fn shutdown(
    ws: &mut WsStream,
    applying: Option<ApplyFuture>,
    interval: Duration,
    log_ends: Vec<odac_protocol::LogsEnd>,
) -> SessionEnd {
    for end in log_ends {
        let _ = send(
            ws,
            Message::text(encode(&AgentMessage::LogsEnd(end))),
            interval,
        )
        .await;
    }
    if let Some(f) = applying {
        match tokio::time::timeout(SHUTDOWN_APPLY_GRACE, f).await {
            Ok(outcome) => {
                let _ = answer_apply(ws, outcome, interval).await;
            }
            Err(_) => warn!("shutdown: a desired-state change was still being persisted after 3s"),
        }
    }
    close(ws, CloseCode::Away, "agent shutting down").await;
    SessionEnd::Shutdown
}

/// Sends every unsent report.
async fn flush(
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

async fn send(ws: &mut WsStream, msg: Message, interval: Duration) -> Result<(), Lost> {
    match tokio::time::timeout(interval * 2, ws.send(msg)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(Lost(format!("send failed: {e}"))),
        Err(_) => Err(Lost(format!(
            "send blocked for {}s",
            (interval * 2).as_secs()
        ))),
    }
}

/// Tells the control plane why (`error{code:"too_large"}`, best effort), then closes with 1009.
async fn refuse_oversize(ws: &mut WsStream, reason: &str, interval: Duration) {
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
async fn close(ws: &mut WsStream, code: CloseCode, reason: &'static str) {
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

fn closed_reason(frame: Option<&CloseFrame>) -> String {
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

fn too_large(size: usize) -> String {
    format!("refused a frame of {size} bytes (limit {MAX_FRAME_BYTES}); closed with 1009")
}
