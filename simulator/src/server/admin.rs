//! Admin endpoints: fault injection (`/api/admin/faults`) and enrollment (`POST /api/enroll`
//! trades a one-time code for an agent token; `POST /api/enroll/codes` issues a code).

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use odac_protocol::MAX_FRAME_BYTES;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::server::api_error::ApiError;
use crate::server::body::{no_fields, parse_json, typed};
use crate::state::faults::{FaultRequest, FaultView};
use crate::state::hub::{Hub, SessionCmd};

/// Answer of `POST /api/admin/faults`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FaultOutcome {
    /// Standing faults after the request.
    pub faults: FaultView,
    /// Sessions that received the one-shot actions.
    pub sessions_affected: usize,
}

/// A frame that is not JSON.
pub const MALFORMED_FRAME: &str = "{\"type\": \"desired_state\", this is not json";

/// A valid-looking JSON frame one byte over the protocol's limit.
pub fn oversize_frame() -> String {
    let head = "{\"type\":\"error\",\"code\":\"internal\",\"message\":\"";
    let tail = "\"}";
    let pad = (MAX_FRAME_BYTES + 1).saturating_sub(head.len() + tail.len());
    format!("{head}{}{tail}", "x".repeat(pad))
}

/// Applies a fault request: standing faults, then one-shot actions on every live session.
pub fn apply_faults(hub: &Hub, req: &FaultRequest) -> FaultOutcome {
    hub.faults.apply(req);
    let mut affected = 0;
    if req.send_malformed {
        affected = affected.max(hub.broadcast_cmd(&SessionCmd::SendRaw(MALFORMED_FRAME.into())));
    }
    if req.send_oversize {
        affected = affected.max(hub.broadcast_cmd(&SessionCmd::SendRaw(oversize_frame())));
    }
    if req.drop_connections {
        affected = affected.max(hub.broadcast_cmd(&SessionCmd::Drop));
    }
    hub.emit_faults();
    FaultOutcome {
        faults: hub.faults.view(),
        sessions_affected: affected,
    }
}

/// `GET /api/admin/faults`.
pub async fn get_faults(State(hub): State<Arc<Hub>>) -> Json<FaultView> {
    Json(hub.faults.view())
}

/// `POST /api/admin/faults`.
pub async fn post_faults(
    State(hub): State<Arc<Hub>>,
    body: Bytes,
) -> Result<Json<FaultOutcome>, ApiError> {
    let req: FaultRequest = typed(parse_json(&body)?, "")?;
    req.validate()?;
    Ok(Json(apply_faults(&hub, &req)))
}

/// `DELETE /api/admin/faults`: clears every standing fault.
pub async fn clear_faults(State(hub): State<Arc<Hub>>) -> Json<FaultOutcome> {
    Json(apply_faults(
        &hub,
        &FaultRequest {
            clear: true,
            ..FaultRequest::default()
        },
    ))
}

/// Answer of `POST /api/enroll`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Enrolled {
    /// The agent's bearer token (shown once).
    pub token: String,
    /// The release keys agents should trust for self-update (`--release-public-key`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub release_keys: Vec<String>,
}

/// The body of `POST /api/enroll`.
#[derive(Debug, Default, Deserialize)]
struct EnrollRequest {
    #[serde(default)]
    code: Option<String>,
    #[serde(default)]
    agent_id: Option<String>,
}

/// `POST /api/enroll`: body `{"code": "...", "agent_id": "..."?}`. An `agent_id` is checked
/// (the agent-id rule, and 409 when another credential holds it) before the code is spent;
/// the token is then bound to it.
pub async fn enroll(
    State(hub): State<Arc<Hub>>,
    body: Bytes,
) -> Result<(StatusCode, Json<Enrolled>), ApiError> {
    let req: EnrollRequest = typed(parse_json(&body)?, "")?;
    let code = req
        .code
        .as_deref()
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .ok_or_else(|| ApiError::bad_request("code", "code: is missing"))?;
    if let Some(id) = &req.agent_id {
        odac_protocol::validate_agent_id("agent_id", id)?;
    }
    let token = hub
        .redeem(code, req.agent_id.as_deref())
        .await
        .map_err(|r| ApiError {
            status: StatusCode::CONFLICT,
            error: r.to_string(),
            field: Some("agent_id".to_owned()),
        })?
        .ok_or_else(|| ApiError {
            status: StatusCode::UNAUTHORIZED,
            error: "code: unknown or already used enrollment code".to_owned(),
            field: Some("code".to_owned()),
        })?;
    let release_keys = hub.release_keys.get().cloned().unwrap_or_default();
    Ok((
        StatusCode::CREATED,
        Json(Enrolled {
            token,
            release_keys,
        }),
    ))
}

/// `POST /api/enroll/codes`: issues a one-time enrollment code (no body, or `{}`).
pub async fn new_enroll_code(
    State(hub): State<Arc<Hub>>,
    body: Bytes,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    no_fields(&body)?;
    let code = format!("enr_{}", uuid::Uuid::new_v4().simple());
    hub.add_enroll_code(&code).await;
    Ok((
        StatusCode::CREATED,
        Json(serde_json::json!({ "code": code })),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oversize_frame_is_just_over_the_limit() {
        assert_eq!(oversize_frame().len(), MAX_FRAME_BYTES + 1);
        assert!(serde_json::from_str::<Value>(MALFORMED_FRAME).is_err());
    }
}
