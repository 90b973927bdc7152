//! Changes of desired state in a session: a `desired_state`, `app_upsert` or `app_delete`
//! handed to the app manager ([`start_apply`]), one at a time; its [`Outcome`] answered with an
//! `ack` once persisted or an `error` when refused; a refused change puts the agent out of step
//! ([`super::resync`]): incremental changes are refused and a `resync` asks for a snapshot.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use odac_protocol::{Ack, AgentMessage, ControlMessage, ErrorCode, ErrorMessage, Resync};
use tokio::time::Instant;
use tracing::{info, warn};

use super::connect::WsStream;
use super::control::{AppControl, ApplyError};
use super::resync::ResyncState;
use super::ws_io::{Lost, send_msg};

/// A change applied (or refused) by the app manager.
pub(super) struct Outcome {
    pub(super) seq: u64,
    /// A full `desired_state` (not an upsert or delete).
    pub(super) snapshot: bool,
    pub(super) result: Result<(), ApplyError>,
}

/// A change being persisted by the app manager.
pub(super) type ApplyFuture = Pin<Box<dyn Future<Output = Outcome> + Send>>;

/// A `resync` to send at `at`.
pub(super) struct PendingResync {
    pub(super) at: Instant,
    reason: String,
}

/// Hands a state-changing message to the app manager; `None` for any other message.
pub(super) fn start_apply(apps: &Arc<dyn AppControl>, msg: ControlMessage) -> Option<ApplyFuture> {
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
        | ControlMessage::LogsCancel(_)
        | ControlMessage::UpdateOffer(_) => None,
        ControlMessage::ExecRequest(_) => None,
    }
}

/// The outcome of the change being persisted; never ready when there is none.
pub(super) async fn poll_apply(applying: &mut Option<ApplyFuture>) -> Outcome {
    match applying {
        Some(f) => f.await,
        None => std::future::pending().await,
    }
}

/// Updates the resync state after a change; the `resync` to send when it was refused.
pub(super) fn after_apply(state: &ResyncState, outcome: &Outcome) -> Option<PendingResync> {
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
pub(super) async fn refuse_out_of_step(
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
    send_msg(ws, &AgentMessage::Error(err), interval).await
}

/// Acks a persisted change, or answers a refused one with its `error`.
pub(super) async fn answer_apply(
    ws: &mut WsStream,
    outcome: Outcome,
    interval: Duration,
) -> Result<(), Lost> {
    let seq = outcome.seq;
    let msg = match outcome.result {
        Ok(()) => AgentMessage::Ack(Ack { seq }),
        Err(e) => {
            warn!(seq, code = %e.code, "desired-state change refused: {}", e.message);
            AgentMessage::Error(ErrorMessage::new(e.code, e.message, Some(seq)))
        }
    };
    send_msg(ws, &msg, interval).await
}

/// Asks the control plane for a full desired state.
pub(super) async fn send_resync(
    ws: &mut WsStream,
    pending: PendingResync,
    last_generation: Option<u64>,
    interval: Duration,
) -> Result<(), Lost> {
    let msg = AgentMessage::Resync(Resync {
        reason: pending.reason,
        last_generation,
    });
    info!("asking the control plane for a full desired state (resync)");
    send_msg(ws, &msg, interval).await
}
