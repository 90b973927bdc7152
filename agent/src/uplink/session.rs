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
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use odac_protocol::{
    AgentMessage, ControlMessage, ErrorCode, Hello, MAX_FRAME_BYTES, Welcome, decode_control,
};
use tokio::sync::{Notify, broadcast};
use tokio::time::{Instant, MissedTickBehavior};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::LinkEvent;
use super::apply::{
    ApplyFuture, PendingResync, after_apply, answer_apply, poll_apply, refuse_out_of_step,
    send_resync, start_apply,
};
use super::connect::WsStream;
use super::control::AppControl;
use super::heartbeat::{Beat, Heartbeat};
use super::inbound::{Inbox, on_frame, refuse};
use super::logs::{LogSessions, LogSource};
use super::outbox::Outbox;
use super::resync::{ResyncState, is_incremental};
use super::ws_io::{Lost, close, closed_reason, flush, send, send_msg, too_large};
use crate::liveness::Heartbeat as LoopBeat;
use odac_host::lock::lock;

/// How long shutdown waits for the change being persisted before closing anyway.
const SHUTDOWN_APPLY_GRACE: Duration = Duration::from_secs(3);

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
    /// Where `update_offer`s go (`None`: each is refused).
    pub updates: Option<&'a super::UpdateOffers>,
    /// Serves exec sessions (`None`: every `exec_request` is refused).
    pub exec: Option<Arc<super::exec::ExecService>>,
}

/// Runs one session on an established WebSocket.
pub(crate) async fn run_session(mut ws: WsStream, ctx: SessionCtx<'_>) -> SessionEnd {
    let mut queued: VecDeque<ControlMessage> = VecDeque::new();
    let welcome = match handshake(&mut ws, &ctx, &mut queued).await {
        Ok(w) => w,
        Err(end) => return end,
    };
    let established = Instant::now();
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
    let served = match open(&mut ws, &ctx, interval).await {
        Ok(()) => serve(&mut ws, &ctx, queued, interval).await,
        Err(lost) => Err(lost),
    };
    served.unwrap_or_else(|Lost(reason)| SessionEnd::Lost {
        reason,
        healthy_for: Some(established.elapsed()),
    })
}

/// Sends the full inventory, then every app's status, then whatever is still unacked.
async fn open(ws: &mut WsStream, ctx: &SessionCtx<'_>, interval: Duration) -> Result<(), Lost> {
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
    flush(ws, ctx.outbox, interval).await
}

/// Serves the session until shutdown (`Ok`) or until the link is lost.
async fn serve(
    ws: &mut WsStream,
    ctx: &SessionCtx<'_>,
    mut queued: VecDeque<ControlMessage>,
    interval: Duration,
) -> Result<SessionEnd, Lost> {
    let mut heartbeat = Heartbeat::new(interval);
    let mut ticker = tokio::time::interval_at(Instant::now() + interval, interval);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut applying: Option<ApplyFuture> = None;
    let mut resync: Option<PendingResync> = None;
    let mut idle = tokio::time::interval(ctx.beat.every());
    idle.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut logs = LogSessions::new(ctx.logs.clone());

    loop {
        ctx.beat.stamp();
        while applying.is_none() {
            let Some(m) = queued.pop_front() else { break };
            if ctx.resync.awaiting() && is_incremental(&m) {
                refuse_out_of_step(ws, &m, interval).await?;
                continue;
            }
            applying = start_apply(ctx.apps, m);
        }
        let resync_at = resync.as_ref().map(|r| r.at);
        tokio::select! {
            biased;
            () = ctx.shutdown.cancelled() => {
                return Ok(shutdown(ws, applying, interval, logs.shut_down()).await);
            }
            outcome = poll_apply(&mut applying) => {
                applying = None;
                if let Some(next) = after_apply(ctx.resync, &outcome) {
                    resync = Some(next);
                } else if outcome.snapshot && outcome.result.is_ok() {
                    resync = None;
                }
                answer_apply(ws, outcome, interval).await?;
            }
            () = sleep_until_opt(resync_at) => {
                if let Some(r) = resync.take() {
                    send_resync(ws, r, ctx.apps.generation(), interval).await?;
                }
            }
            frame = ws.next() => {
                let inbox = Inbox { heartbeat: &mut heartbeat, outbox: ctx.outbox, queued: &mut queued, logs: &mut logs, updates: ctx.updates, exec: ctx.exec.as_ref() };
                if let Some(refused) = on_frame(ws, frame, inbox, interval).await? {
                    resync = after_apply(ctx.resync, &refused).or(resync);
                }
            }
            _ = ticker.tick() => match heartbeat.tick(Instant::now()) {
                Beat::Ping => {
                    debug!("heartbeat ping");
                    send(ws, Message::Ping(Vec::new().into()), interval).await?;
                }
                Beat::Dead { silent_for } => {
                    return Err(Lost(format!("no pong for {}s (two heartbeat intervals)", silent_for.as_secs_f64().round())));
                }
            },
            () = ctx.wake.notified() => flush(ws, ctx.outbox, interval).await?,
            // after every report: log output never delays a status
            msg = logs.next() => send_msg(ws, &msg, interval).await?,
            _ = idle.tick() => {}
        }
    }
}

/// Sends `hello` and waits for `welcome`. State-changing messages that arrive first are kept.
async fn handshake(
    ws: &mut WsStream,
    ctx: &SessionCtx<'_>,
    queued: &mut VecDeque<ControlMessage>,
) -> Result<Welcome, SessionEnd> {
    let early = |reason: String| SessionEnd::Lost {
        reason,
        healthy_for: None,
    };
    let hello = AgentMessage::Hello(ctx.hello.clone());
    send_msg(ws, &hello, ctx.welcome_timeout)
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

/// Ends the open log streams, waits briefly for the change being persisted, closes 1001.
async fn shutdown(
    ws: &mut WsStream,
    applying: Option<ApplyFuture>,
    interval: Duration,
    log_ends: Vec<odac_protocol::LogsEnd>,
) -> SessionEnd {
    for end in log_ends {
        let _ = send_msg(ws, &AgentMessage::LogsEnd(end), interval).await;
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

async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}
