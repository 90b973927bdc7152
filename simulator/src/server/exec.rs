//! Exec sessions through the control plane. A viewer (`odac app exec`, `odac app shell`, the
//! dashboard's terminal) upgrades `GET /api/apps/{name}/exec?cmd=[…]&tty=&stdin=&cols=&rows=&user=`
//! (the API's token rules apply); the simulator opens a ticket for the app's host
//! (`state::exec_tickets`), sends `exec_request` on the host's session and, once upgraded,
//! waits for the agent ([`super::exec_relay`]). The agent dials `GET /agent/v1/exec` with its
//! bearer token, its `odac-agent-id` and the ticket in `odac-exec-ticket`: an unknown, replayed,
//! expired or foreign ticket is refused with 403 and the reason, never with the ticket.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use odac_protocol::{
    ControlMessage, EXEC_SUBPROTOCOL, EXEC_TICKET_HEADER, ExecRequest, MAX_EXEC_DATA_FRAME, encode,
};

use crate::server::api_error::ApiError;
use crate::server::exec_relay::serve_viewer;
use crate::server::ws::bearer;
use crate::state::exec_tickets::{DEFAULT_TICKET_TTL, Handoff};
use crate::state::hub::{Hub, SessionCmd};
use crate::state::model::hash_secret;

/// Where agents dial exec sessions: the agents' path and `/exec`.
pub const AGENT_EXEC_PATH: &str = "/agent/v1/exec";

/// Who asked, for the audit trail: the API token's fingerprint, or `open-api`.
pub fn principal(hub: &Hub, headers: &HeaderMap) -> String {
    match (&hub.api_token, bearer(headers)) {
        (Some(_), Some(token)) => {
            let fp: String = hash_secret(token)
                .chars()
                .filter(char::is_ascii_hexdigit)
                .take(12)
                .collect();
            format!("api-token:{fp}")
        }
        _ => "open-api".to_owned(),
    }
}

fn size(q: &HashMap<String, String>, key: &str) -> Result<Option<u16>, ApiError> {
    let Some(raw) = q.get(key).filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    match raw.parse::<u16>() {
        Ok(n) if (1..=1000).contains(&n) => Ok(Some(n)),
        _ => Err(ApiError::bad_request(
            key,
            format!("{key}: {raw:?} is not a number in 1..=1000"),
        )),
    }
}

/// The exec request a viewer's query asks for (session id, ticket and principal left empty).
fn parse_request(name: &str, q: &HashMap<String, String>) -> Result<ExecRequest, ApiError> {
    let raw = q
        .get("cmd")
        .ok_or_else(|| ApiError::bad_request("cmd", "cmd: missing (a json array of strings)"))?;
    let cmd: Vec<String> = serde_json::from_str(raw).map_err(|e| {
        ApiError::bad_request(
            "cmd",
            format!("cmd: {raw:?} is not a json array of strings: {e}"),
        )
    })?;
    let flag = |key: &str| match q.get(key).map(String::as_str) {
        None | Some("" | "false" | "0") => Ok(false),
        Some("true" | "1") => Ok(true),
        Some(v) => Err(ApiError::bad_request(
            key,
            format!("{key}: {v:?} is not true or false"),
        )),
    };
    Ok(ExecRequest {
        app: name.to_owned(),
        cmd,
        tty: flag("tty")?,
        stdin: flag("stdin")?,
        user: q.get("user").filter(|u| !u.is_empty()).cloned(),
        cols: size(q, "cols")?,
        rows: size(q, "rows")?,
        ..ExecRequest::default()
    })
}

/// `GET /api/apps/{name}/exec`: a viewer's WebSocket.
pub async fn viewer_upgrade(
    State(hub): State<Arc<Hub>>,
    Path(name): Path<String>,
    Query(q): Query<HashMap<String, String>>,
    headers: HeaderMap,
    ws: WebSocketUpgrade,
) -> Result<Response, ApiError> {
    let app = hub.app(&name).ok_or_else(|| ApiError::unknown_app(&name))?;
    let mut req = parse_request(&name, &q)?;
    if hub.session_id(&app.host).is_none() {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            format!("host {} of app {name:?} is not connected", app.host),
        ));
    }
    req.principal = principal(&hub, &headers);
    let (session_id, ticket, handoff) = hub.exec.open(&app.host, DEFAULT_TICKET_TTL);
    req.session_id = session_id.clone();
    req.ticket = ticket;
    if let Err(e) = req.validate() {
        hub.exec.forget(&session_id);
        return Err(ApiError::bad_request(e.field.clone(), e.to_string()));
    }
    tracing::info!(session = %session_id, principal = %req.principal, app = %name, tty = req.tty, "exec session requested");
    let frame = encode(&ControlMessage::ExecRequest(req));
    if !hub.send_to_session(&app.host, SessionCmd::SendRaw(frame)) {
        hub.exec.forget(&session_id);
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            format!("host {} of app {name:?} is not connected", app.host),
        ));
    }
    Ok(ws
        .protocols([EXEC_SUBPROTOCOL])
        .max_message_size(MAX_EXEC_DATA_FRAME * 2)
        .on_upgrade(move |socket| serve_viewer(hub, socket, session_id, handoff)))
}

/// `GET /agent/v1/exec`: an agent dials the socket of one session.
pub async fn agent_upgrade(
    State(hub): State<Arc<Hub>>,
    headers: HeaderMap,
    ws: WebSocketUpgrade,
) -> Response {
    let Some(token) = bearer(&headers).filter(|t| hub.agent_token_ok(t)) else {
        return ApiError::new(StatusCode::UNAUTHORIZED, "missing or refused bearer token")
            .into_response();
    };
    let caller = match crate::server::agent_auth::Caller::from_upgrade(&hub, token, &headers).await
    {
        Ok(c) => c,
        Err(refused) => return refused.into_response(),
    };
    let Some(agent_id) = caller.claimed() else {
        return ApiError::bad_request(
            odac_protocol::AGENT_ID_HEADER,
            "odac-agent-id: required to open an exec session",
        )
        .into_response();
    };
    let Some(ticket) = headers
        .get(EXEC_TICKET_HEADER)
        .and_then(|v| v.to_str().ok())
    else {
        return ApiError::new(StatusCode::UNAUTHORIZED, "missing exec ticket").into_response();
    };
    if let Some(refused) =
        crate::server::agent_auth::subprotocol_refusal(&headers, EXEC_SUBPROTOCOL)
    {
        return refused;
    }
    match hub.exec.claim(ticket, agent_id) {
        Err(refusal) => {
            tracing::warn!(agent_id = %agent_id.escape_debug(), "exec socket refused: {refusal}");
            ApiError::new(StatusCode::FORBIDDEN, refusal.to_string()).into_response()
        }
        Ok((session_id, to_viewer)) => {
            tracing::info!(session = %session_id, agent_id, "exec session socket opened by the agent");
            ws.protocols([EXEC_SUBPROTOCOL])
                .max_message_size(MAX_EXEC_DATA_FRAME * 2)
                .on_upgrade(move |socket| async move {
                    let _ = to_viewer.send(Handoff::Socket(Box::new(socket)));
                })
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_exec_path_is_the_agents_path_and_the_suffix() {
        assert_eq!(
            super::AGENT_EXEC_PATH,
            format!("{}{}", crate::AGENT_PATH, odac_protocol::EXEC_PATH_SUFFIX)
        );
    }
}
