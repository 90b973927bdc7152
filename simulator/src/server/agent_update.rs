//! Agent self-update endpoints. `POST /api/hosts/{id}/agent-update` with
//! `{"version": "0.2.0"}` offers the signed release of that version (from `--releases DIR`)
//! to the host's live session as `update_offer`; the host's `update` then follows its
//! agent's `update_status` reports. `GET /releases/{file}` serves the artefacts of that
//! directory to agents (open like the enrollment endpoint: an artefact is no secret, and the
//! agent checks its signed size and hash).

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::server::api_error::ApiError;
use crate::server::body::{parse_json, typed};
use crate::state::hub::Hub;

type ApiResult<T> = Result<T, ApiError>;

/// The body of an offer.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OfferRequest {
    /// The release version, `MAJOR.MINOR.PATCH`.
    pub version: String,
}

/// `POST /api/hosts/{id}/agent-update`.
pub async fn offer_update(
    State(hub): State<Arc<Hub>>,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<Json<Value>> {
    let request: OfferRequest = typed(parse_json(&body)?, "")?;
    odac_protocol::check_version("version", &request.version)
        .map_err(|e| ApiError::bad_request("version", e.to_string()))?;
    if hub.host(&id).is_none() {
        return Err(ApiError::unknown_host(&id));
    }
    let Some(dir) = hub.releases.get() else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "no releases to offer: the simulator was started without --releases DIR",
        ));
    };
    let release = crate::release::find(dir, &request.version)
        .map_err(|e| ApiError::new(StatusCode::NOT_FOUND, e.to_string()))?;
    if !hub.offer_update(&id, release) {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            format!("host {id} is not connected: no update can be offered to it now"),
        ));
    }
    Ok(Json(
        json!({"host": id, "version": request.version, "offered": true}),
    ))
}

/// `GET /releases/{file}`: a file of the releases directory (plain names only); a
/// `Range: bytes=A-B` (or `A-`) gets `206` with that part, one past the end `416`.
pub async fn artefact(
    State(hub): State<Arc<Hub>>,
    Path(file): Path<String>,
    headers: HeaderMap,
) -> Response {
    let plain = !file.is_empty()
        && !file.starts_with('.')
        && file
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-+".contains(&b));
    let Some(dir) = hub.releases.get().filter(|_| plain) else {
        return ApiError::new(StatusCode::NOT_FOUND, "no such release file").into_response();
    };
    let bytes = match tokio::fs::read(dir.join(&file)).await {
        Ok(bytes) => bytes,
        Err(_) => {
            return ApiError::new(StatusCode::NOT_FOUND, "no such release file").into_response();
        }
    };
    let octets = (header::CONTENT_TYPE, "application/octet-stream".to_owned());
    let Some((from, to)) = headers
        .get(header::RANGE)
        .and_then(|v| v.to_str().ok())
        .and_then(parse_range)
    else {
        return ([octets], bytes).into_response();
    };
    let len = bytes.len() as u64;
    if from >= len || to.is_some_and(|t| t < from) {
        let range = (header::CONTENT_RANGE, format!("bytes */{len}"));
        return (StatusCode::RANGE_NOT_SATISFIABLE, [range]).into_response();
    }
    let end = to.map_or(len - 1, |t| t.min(len - 1));
    let range = (header::CONTENT_RANGE, format!("bytes {from}-{end}/{len}"));
    let part = bytes[from as usize..=end as usize].to_vec();
    (StatusCode::PARTIAL_CONTENT, [octets, range], part).into_response()
}

/// `bytes=A-B` or `bytes=A-` → (A, B?); anything else (several ranges, suffixes) → `None`,
/// answered with the whole file.
fn parse_range(value: &str) -> Option<(u64, Option<u64>)> {
    let (from, to) = value.trim().strip_prefix("bytes=")?.split_once('-')?;
    let from = from.trim().parse().ok()?;
    let to = match to.trim() {
        "" => None,
        t => Some(t.parse().ok()?),
    };
    Some((from, to))
}
