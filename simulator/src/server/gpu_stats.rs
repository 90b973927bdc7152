//! The live GPU figures endpoints: `GET /api/gpu-stats` (every host that reported) and
//! `GET /api/hosts/{id}/gpu-stats` (one host, by id or host name), from
//! `state/gpu_history.rs`.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};

use crate::server::api_error::ApiError;
use crate::state::gpu_history::HostGpuStats;
use crate::state::hub::Hub;

/// `GET /api/gpu-stats`: every host that reported, by host id.
pub async fn list_gpu_stats(State(hub): State<Arc<Hub>>) -> Json<Vec<HostGpuStats>> {
    Json(hub.gpu_history.all(crate::clock::now_ms()))
}

/// `GET /api/hosts/{id}/gpu-stats`.
pub async fn get_gpu_stats(
    State(hub): State<Arc<Hub>>,
    Path(id): Path<String>,
) -> Result<Json<HostGpuStats>, ApiError> {
    let host = hub.host(&id).ok_or_else(|| ApiError::unknown_host(&id))?;
    Ok(Json(hub.gpu_history.view(&host.id, crate::clock::now_ms())))
}
