//! Live logs for viewers: `GET /api/apps/{name}/logs?follow=&tail=&since=&timeout=` asks the
//! app's agent for a stream (`logs_request`) and relays it as Server-Sent Events: `logs`
//! (`{lines, dropped}`) for each chunk and one final `end` (`{reason, message, dropped}`).
//! [`LogViewers`] routes the agent's `logs_chunk` / `logs_end` to the viewer by request id;
//! a viewer that goes away sends `logs_cancel`; a session that ends (agent restart, cut link)
//! ends its viewers with `agent_disconnected`. Each viewer has its own bounded queue: a slow
//! viewer loses chunks (counted in the next `dropped`), never the agent's session.

use odac_agent::lock::lock;
use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;
use futures_util::stream::{self, StreamExt};
use odac_protocol::{
    ControlMessage, LogsCancel, LogsChunk, LogsEnd, LogsRequest, MAX_LOGS_TAIL,
    MAX_LOGS_TIMEOUT_SECS, encode,
};
use serde_json::json;
use tokio::sync::mpsc;

use crate::server::api_error::ApiError;
use crate::state::hub::{Hub, SessionCmd};

/// Chunks waiting for one viewer.
const VIEWER_QUEUE: usize = 64;

/// What a viewer receives.
#[derive(Debug, Clone)]
enum ViewerMsg {
    Chunk {
        lines: Vec<String>,
        dropped: u64,
    },
    End {
        reason: String,
        message: String,
        dropped: u64,
    },
}

struct Viewer {
    host: String,
    session_id: String,
    tx: mpsc::Sender<ViewerMsg>,
    /// Chunks lost because the viewer was slow, in lines.
    lost: u64,
}

/// The open viewers, by request id.
#[derive(Default)]
pub struct LogViewers {
    open: Mutex<HashMap<String, Viewer>>,
}

impl LogViewers {
    /// Viewers open now.
    pub fn len(&self) -> usize {
        lock(&self.open).len()
    }

    /// Whether no viewer is open.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn add(&self, request_id: &str, host: &str, session_id: &str) -> mpsc::Receiver<ViewerMsg> {
        let (tx, rx) = mpsc::channel(VIEWER_QUEUE);
        lock(&self.open).insert(
            request_id.to_owned(),
            Viewer {
                host: host.to_owned(),
                session_id: session_id.to_owned(),
                tx,
                lost: 0,
            },
        );
        rx
    }

    /// Relays a `logs_chunk` of `host` to its viewer.
    pub fn chunk(&self, host: &str, chunk: LogsChunk) {
        let mut open = lock(&self.open);
        let Some(v) = open.get_mut(&chunk.request_id).filter(|v| v.host == host) else {
            return;
        };
        let n = chunk.lines.len() as u64;
        let msg = ViewerMsg::Chunk {
            lines: chunk.lines,
            dropped: chunk.dropped + v.lost,
        };
        match v.tx.try_send(msg) {
            Ok(()) => v.lost = 0,
            Err(_) => v.lost += n + chunk.dropped,
        }
    }

    /// Relays a `logs_end` of `host` to its viewer and forgets the viewer.
    pub fn end(&self, host: &str, end: LogsEnd) {
        let mut open = lock(&self.open);
        if open.get(&end.request_id).is_none_or(|v| v.host != host) {
            return;
        }
        if let Some(v) = open.remove(&end.request_id) {
            let reason = serde_json::to_value(end.reason)
                .ok()
                .and_then(|r| r.as_str().map(str::to_owned))
                .unwrap_or_else(|| "error".to_owned());
            finish(&v, reason, end.message, end.dropped);
        }
    }

    /// Ends every viewer of `host`'s session `session_id`: the session is gone.
    pub fn session_ended(&self, host: &str, session_id: &str) {
        let mut open = lock(&self.open);
        let gone: Vec<String> = open
            .iter()
            .filter(|(_, v)| v.host == host && v.session_id == session_id)
            .map(|(id, _)| id.clone())
            .collect();
        for id in gone {
            if let Some(v) = open.remove(&id) {
                finish(
                    &v,
                    "agent_disconnected".to_owned(),
                    format!(
                        "the agent of host {host} disconnected (agent restart or link cut); the stream ended"
                    ),
                    0,
                );
            }
        }
    }

    /// Forgets a viewer that went away; `true` when it was still open.
    fn forget(&self, request_id: &str) -> Option<String> {
        lock(&self.open).remove(request_id).map(|v| v.host)
    }
}

fn finish(v: &Viewer, reason: String, message: String, dropped: u64) {
    let end = ViewerMsg::End {
        reason,
        message,
        dropped: dropped + v.lost,
    };
    // the end must arrive even when the queue is full: make room from a task
    let tx = v.tx.clone();
    if let Err(mpsc::error::TrySendError::Full(end)) = tx.try_send(end) {
        tokio::spawn(async move {
            let _ = tx.send(end).await;
        });
    }
}

/// Sends `logs_cancel` for a viewer that went away while its stream was open.
struct CancelOnDrop {
    hub: Arc<Hub>,
    request_id: String,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(host) = self.hub.logs.forget(&self.request_id) {
            let cancel = ControlMessage::LogsCancel(LogsCancel {
                request_id: self.request_id.clone(),
            });
            self.hub
                .send_to_session(&host, SessionCmd::SendRaw(encode(&cancel)));
        }
    }
}

fn number<T: std::str::FromStr>(
    q: &HashMap<String, String>,
    key: &str,
    max: u64,
) -> Result<Option<T>, ApiError> {
    let Some(raw) = q.get(key).filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    let bad = || ApiError::bad_request(key, format!("{key}: {raw:?} is not a number in 0..={max}"));
    let n: u64 = raw.parse().map_err(|_| bad())?;
    if n > max {
        return Err(bad());
    }
    raw.parse().map(Some).map_err(|_| bad())
}

fn flag(q: &HashMap<String, String>, key: &str) -> Result<bool, ApiError> {
    match q.get(key).map(String::as_str) {
        None | Some("" | "false" | "0") => Ok(false),
        Some("true" | "1") => Ok(true),
        Some(v) => Err(ApiError::bad_request(
            key,
            format!("{key}: {v:?} is not true or false"),
        )),
    }
}

/// `GET /api/apps/{name}/logs`.
pub async fn app_logs(
    State(hub): State<Arc<Hub>>,
    Path(name): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let app = hub.app(&name).ok_or_else(|| ApiError::unknown_app(&name))?;
    let request_id = format!("logs_{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
    let req = LogsRequest {
        request_id: request_id.clone(),
        app: name.clone(),
        follow: flag(&q, "follow")?,
        tail: number(&q, "tail", u64::from(MAX_LOGS_TAIL))?,
        since_secs: number(&q, "since", u64::MAX / 2)?,
        timeout_secs: number(&q, "timeout", u64::from(MAX_LOGS_TIMEOUT_SECS))?,
    };
    if req.timeout_secs == Some(0) {
        return Err(ApiError::bad_request(
            "timeout",
            "timeout: 0 is out of range 1..=86400",
        ));
    }
    let Some(session_id) = hub.session_id(&app.host) else {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            format!(
                "host {} of app {name:?} is not connected: no logs to stream",
                app.host
            ),
        ));
    };
    let rx = hub.logs.add(&request_id, &app.host, &session_id);
    let frame = encode(&ControlMessage::LogsRequest(req));
    if !hub.send_to_session(&app.host, SessionCmd::SendRaw(frame)) {
        hub.logs.forget(&request_id);
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            format!("host {} of app {name:?} is not connected", app.host),
        ));
    }
    let guard = CancelOnDrop {
        hub: Arc::clone(&hub),
        request_id,
    };
    let events = stream::unfold((rx, Some(guard)), |(mut rx, guard)| async move {
        guard.as_ref()?;
        let msg = rx.recv().await?;
        Some(match msg {
            ViewerMsg::Chunk { lines, dropped } => {
                let data = json!({ "lines": lines, "dropped": dropped });
                (
                    Ok(Event::default().event("logs").data(data.to_string())),
                    (rx, guard),
                )
            }
            ViewerMsg::End {
                reason,
                message,
                dropped,
            } => {
                let data = json!({ "reason": reason, "message": message, "dropped": dropped });
                // the stream is over: drop the guard without a cancel
                if let Some(g) = guard {
                    g.hub.logs.forget(&g.request_id);
                }
                (
                    Ok(Event::default().event("end").data(data.to_string())),
                    (rx, None),
                )
            }
        })
    });
    Ok(Sse::new(events.take_until(hub.closed())).keep_alive(KeepAlive::default()))
}
