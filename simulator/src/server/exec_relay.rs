//! The bytes of an exec session, relayed between its viewer's WebSocket and its agent's. The
//! viewer first waits (at most [`AGENT_WAIT`]) for the agent's socket or refusal, which it gets
//! as an `exit` frame with the agent's reason. Each direction is one loop that awaits its
//! send: a viewer that stops reading stops the relay reading the agent, so the back-pressure
//! reaches the agent (which bounds what it leaves unsent). A viewer that goes away closes the
//! agent's socket; an agent socket that closes without an `exit` frame gets one written for it.
//! Nothing of the bytes is logged.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::{Message, WebSocket};
use futures_util::{SinkExt, StreamExt};
use odac_protocol::{ExecEndReason, ExecExit, ExecFrame, MAX_EXEC_DATA_FRAME};
use tokio::sync::oneshot;

use crate::state::exec_tickets::Handoff;
use crate::state::hub::Hub;

/// How long a viewer waits for the agent to dial its session.
pub const AGENT_WAIT: Duration = Duration::from_secs(15);

fn exit_frame(reason: ExecEndReason, message: impl Into<String>) -> Message {
    let frame = ExecFrame::Exit(ExecExit {
        reason,
        code: None,
        message: message.into(),
    });
    Message::Text(frame.encode().into())
}

/// Serves one viewer: waits for its agent, then relays.
pub async fn serve_viewer(
    hub: Arc<Hub>,
    mut viewer: WebSocket,
    session_id: String,
    handoff: oneshot::Receiver<Handoff>,
) {
    let agent = match tokio::time::timeout(AGENT_WAIT, handoff).await {
        Ok(Ok(Handoff::Socket(agent))) => *agent,
        Ok(Ok(Handoff::Refused(r))) => {
            tracing::info!(session = %session_id, reason = %r.reason, "exec session refused by the agent: {}", r.message);
            let _ = viewer.send(exit_frame(r.reason, r.message)).await;
            let _ = viewer.send(Message::Close(None)).await;
            return;
        }
        Ok(Err(_)) | Err(_) => {
            hub.exec.forget(&session_id);
            let message = format!(
                "the agent did not open the session within {}s",
                AGENT_WAIT.as_secs()
            );
            let _ = viewer.send(exit_frame(ExecEndReason::Error, message)).await;
            let _ = viewer.send(Message::Close(None)).await;
            return;
        }
    };
    relay(agent, viewer).await;
    tracing::info!(session = %session_id, "exec session relay ended");
}

async fn relay(agent: WebSocket, viewer: WebSocket) {
    let (mut to_agent, mut from_agent) = agent.split();
    let (mut to_viewer, mut from_viewer) = viewer.split();
    let down = async move {
        let mut exited = false;
        while let Some(Ok(m)) = from_agent.next().await {
            let m = match m {
                Message::Text(t) => {
                    exited |= matches!(ExecFrame::decode(&t), Ok(ExecFrame::Exit(_)));
                    Message::Text(t)
                }
                Message::Binary(b) => Message::Binary(b),
                Message::Close(_) => break,
                _ => continue,
            };
            if to_viewer.send(m).await.is_err() {
                return;
            }
        }
        if !exited {
            let message = "the agent closed the session without an exit status";
            let _ = to_viewer
                .send(exit_frame(ExecEndReason::Error, message))
                .await;
        }
        let _ = to_viewer.send(Message::Close(None)).await;
    };
    let up = async move {
        while let Some(Ok(m)) = from_viewer.next().await {
            let m = match m {
                Message::Binary(b) if b.len() <= MAX_EXEC_DATA_FRAME => Message::Binary(b),
                Message::Text(t) if ExecFrame::decode(&t).is_ok() => Message::Text(t),
                Message::Close(_) => break,
                _ => continue,
            };
            if to_agent.send(m).await.is_err() {
                return;
            }
        }
        let _ = to_agent.send(Message::Close(None)).await;
    };
    tokio::select! {
        () = down => {}
        () = up => {}
    }
}
