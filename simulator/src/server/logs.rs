//! Live logs for viewers: `GET /api/apps/{name}/logs?follow=&tail=&since=&timeout=` asks the
//! app's agent for a stream (`logs_request`) and relays it as Server-Sent Events: `logs`
//! (`{lines, dropped}`) for each chunk and one final `end` (`{reason, message, dropped}`).
//! [`LogViewers`] routes the agent's `logs_chunk` / `logs_end` to the viewer by request id;
//! a viewer that goes away sends `logs_cancel`; a session that ends (agent restart, cut link)
//! ends its viewers with `agent_disconnected`. Each viewer has its own bounded queue: a slow
//! viewer loses chunks (counted in the next `dropped`), never the agent's session.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;
use futures_util::stream::{self, StreamExt};
use odac_protocol::{
    ControlMessage, LogsCancel, LogsRequest, MAX_LOGS_TAIL, MAX_LOGS_TIMEOUT_SECS, encode,
};
use serde_json::json;

use crate::server::api_error::ApiError;
use crate::state::hub::{Hub, SessionCmd};
pub use crate::state::log_viewers::LogViewers;
use crate::state::log_viewers::ViewerMsg;

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
