//! Every error answer is JSON `{error, field?}`: a middleware rewrites the plain-text bodies
//! that axum's own rejections carry (405 method not allowed, 413 body too large, 400/426 from
//! extractors) into the API's error shape, keeping the status and headers such as `Allow`.
//! Answers that are already JSON pass through untouched.

use axum::body::to_bytes;
use axum::extract::Request;
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::server::api_error::ApiError;

/// Largest request body the API reads (axum's default body limit).
pub const MAX_BODY_BYTES: usize = 2 * 1024 * 1024;

/// Rewrites non-JSON error answers as JSON.
pub async fn json_errors(req: Request, next: Next) -> Response {
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    let resp = next.run(req).await;
    let status = resp.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return resp;
    }
    let is_json = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|c| c.starts_with("application/json"));
    if is_json {
        return resp;
    }
    let (parts, body) = resp.into_parts();
    let text = to_bytes(body, 4096)
        .await
        .map(|b| String::from_utf8_lossy(&b).trim().to_owned())
        .unwrap_or_default();
    let error = match status {
        StatusCode::NOT_FOUND => format!("no such endpoint: {path}"),
        StatusCode::METHOD_NOT_ALLOWED => format!("method {method} is not allowed on {path}"),
        StatusCode::PAYLOAD_TOO_LARGE => {
            format!("the request body is larger than the limit of {MAX_BODY_BYTES} bytes")
        }
        _ if !text.is_empty() => text.to_lowercase(),
        _ => status
            .canonical_reason()
            .unwrap_or("request failed")
            .to_lowercase(),
    };
    let mut out = ApiError::new(status, error).into_response();
    for name in [header::ALLOW, header::WWW_AUTHENTICATE, header::RETRY_AFTER] {
        if let Some(v) = parts.headers.get(&name) {
            out.headers_mut().insert(name, v.clone());
        }
    }
    out
}
