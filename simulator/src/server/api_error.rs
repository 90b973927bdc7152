//! The REST API's error answer: an HTTP status with JSON `{error, field}`, where `field` names
//! the request field exactly as the protocol's validation does (e.g. `gpu.count`).

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use odac_protocol::ValidationError;
use serde::Serialize;

use crate::gpu_auto::GpuAutoError;
use crate::placement::PlacementError;
use crate::state::hub::HubError;

/// An API error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{error}")]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// Message for humans.
    pub error: String,
    /// The request field at fault, if any.
    pub field: Option<String>,
}

#[derive(Serialize)]
struct Body<'a> {
    error: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    field: Option<&'a str>,
}

impl ApiError {
    /// 400 naming `field`.
    pub fn bad_request(field: impl Into<String>, error: impl Into<String>) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            error: error.into(),
            field: Some(field.into()),
        }
    }

    /// 404 for an unknown app.
    pub fn unknown_app(name: &str) -> Self {
        Self {
            status: StatusCode::NOT_FOUND,
            error: format!("unknown app {name:?}"),
            field: None,
        }
    }

    /// 404 for an unknown host.
    pub fn unknown_host(id: &str) -> Self {
        Self {
            status: StatusCode::NOT_FOUND,
            error: format!("unknown host {id:?}"),
            field: None,
        }
    }

    /// Any status with a message.
    pub fn new(status: StatusCode, error: impl Into<String>) -> Self {
        Self {
            status,
            error: error.into(),
            field: None,
        }
    }
}

/// The hub's refusals as HTTP: a host that cannot be chosen is a 400 naming `host`, an app
/// name taken a 409 naming `name`, an unknown app a 404, an app that would not fit a frame a
/// 400 naming its largest field.
impl From<HubError> for ApiError {
    fn from(e: HubError) -> Self {
        let error = e.to_string();
        match e {
            HubError::NoHostConnected
            | HubError::ManyHostsConnected(_)
            | HubError::UnknownHost(_)
            | HubError::AmbiguousHost { .. } => ApiError::bad_request("host", error),
            HubError::AppExists(_) => ApiError {
                status: StatusCode::CONFLICT,
                error,
                field: Some("name".to_owned()),
            },
            HubError::UnknownApp(name) => ApiError::unknown_app(&name),
            HubError::TooLarge { field, .. } => ApiError::bad_request(field, error),
        }
    }
}

impl From<ValidationError> for ApiError {
    fn from(e: ValidationError) -> Self {
        let error = e.to_string();
        ApiError::bad_request(e.field, error)
    }
}

/// Automatic vendor detection's refusals: a 400 naming the request field at fault.
impl From<GpuAutoError> for ApiError {
    fn from(e: GpuAutoError) -> Self {
        match e {
            GpuAutoError::Invalid(v) => v.into(),
            GpuAutoError::NoGpu { .. } => ApiError::bad_request(e.field(), e.to_string()),
        }
    }
}

/// No host to place a new app on: a 400 naming `host`.
impl From<PlacementError> for ApiError {
    fn from(e: PlacementError) -> Self {
        ApiError::bad_request("host", e.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = Body {
            error: &self.error,
            field: self.field.as_deref(),
        };
        (self.status, Json(body)).into_response()
    }
}
