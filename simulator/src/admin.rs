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

use crate::api_error::ApiError;
use crate::faults::{FaultRequest, FaultView};
use crate::hub::{Hub, SessionCmd};

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
    let req: FaultRequest =
        serde_path_to_error::deserialize(&mut serde_json::Deserializer::from_slice(&body))
            .map_err(|e| {
                let field = e.path().to_string();
                let field = if field == "." {
                    "body".to_owned()
                } else {
                    field
                };
                ApiError::bad_request(field.clone(), format!("{field}: {}", e.into_inner()))
            })?;
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
}

/// `POST /api/enroll`: body `{"code": "...", "agent_id": "..."?}`.
pub async fn enroll(
    State(hub): State<Arc<Hub>>,
    body: Bytes,
) -> Result<(StatusCode, Json<Enrolled>), ApiError> {
    let v: Value = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad_request("body", format!("body: not valid JSON: {e}")))?;
    let code = v
        .get("code")
        .and_then(Value::as_str)
        .filter(|c| !c.trim().is_empty())
        .ok_or_else(|| ApiError::bad_request("code", "code: is missing"))?;
    let agent_id = v.get("agent_id").and_then(Value::as_str);
    let token = hub.redeem(code.trim(), agent_id).ok_or_else(|| ApiError {
        status: StatusCode::UNAUTHORIZED,
        error: "code: unknown or already used enrollment code".to_owned(),
        field: Some("code".to_owned()),
    })?;
    Ok((StatusCode::CREATED, Json(Enrolled { token })))
}

/// `POST /api/enroll/codes`: issues a one-time enrollment code.
pub async fn new_enroll_code(State(hub): State<Arc<Hub>>) -> (StatusCode, Json<Value>) {
    let code = format!("enr_{}", uuid::Uuid::new_v4().simple());
    hub.add_enroll_code(&code);
    (
        StatusCode::CREATED,
        Json(serde_json::json!({ "code": code })),
    )
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
