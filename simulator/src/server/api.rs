//! The REST API for hosts and apps under `/api/` (documented in `simulator/API.md`). Bodies
//! are parsed by hand so every refusal is a 400 `{error, field}` naming the field the way the
//! protocol's validation does (`gpu.count`, `ports[0].container`, …); unknown apps are 404.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use odac_protocol::{AppSpec, GpuRequest};
use serde::Serialize;
use serde_json::Value;

use crate::catalog;
use crate::server::api_error::ApiError;
use crate::server::body::{parse_json, typed};
use crate::state::hub::Hub;
use crate::state::views::{AppView, HostView};

type ApiResult<T> = Result<T, ApiError>;

/// Parses a `POST /api/apps` body: an `AppSpec` plus an optional `host` (ODAC's `shmSize`
/// taken for `shm_size`), its host-access fields checked.
pub fn parse_create(body: &[u8]) -> ApiResult<(Option<String>, AppSpec)> {
    let mut value = parse_json(body)?;
    let Value::Object(map) = &mut value else {
        return Err(ApiError::bad_request(
            "body",
            "body: expected a JSON object (an app spec)",
        ));
    };
    let host = match map.remove("host") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() => None,
        Some(Value::String(s)) => Some(s),
        Some(_) => {
            return Err(ApiError::bad_request(
                "host",
                "host: expected a host id or host name",
            ));
        }
    };
    // ODAC's payload spells it `shmSize`
    if let Some(shm) = map.remove("shmSize") {
        if map.contains_key("shm_size") {
            return Err(ApiError::bad_request(
                "shm_size",
                "shm_size: give either shm_size or shmSize, not both",
            ));
        }
        map.insert("shm_size".to_owned(), shm);
    }
    let mut spec: AppSpec = typed(value, "")?;
    if spec.registry_auth.is_some() {
        return Err(ApiError::bad_request(
            "registry_auth",
            "registry_auth: log in to the registry instead (odac registry login HOST)",
        ));
    }
    // a required request without a vendor is legal here: it is resolved from the host's
    // inventory once the host is known (`gpu_auto`)
    let gpu = spec.gpu.take();
    spec.validate()?;
    spec.check_image()?;
    // the host's GPUs are checked once the host is known (`gpu_auto`)
    spec.check_update_order(None)?;
    if let Some(g) = &gpu {
        crate::gpu_auto::validate_fields(g)?;
    }
    spec.gpu = gpu;
    resolve_catalog(&mut spec)?;
    // `shm_size`, `caps`, `sysctls`, `devices`: the agent checks them again, per app
    spec.host_access()?;
    Ok((host, spec))
}

/// Resolves `"app": NAME` to the catalog's image (when no image or source is given), ports,
/// volumes, env and GPU intent, where the spec gives none.
pub fn resolve_catalog(spec: &mut AppSpec) -> ApiResult<()> {
    let Some(name) = &spec.app else {
        return Ok(());
    };
    let entry = catalog::lookup(name).ok_or_else(|| {
        ApiError::bad_request(
            "app",
            format!(
                "app: unknown catalog app {name:?} (known: {})",
                catalog::names()
            ),
        )
    })?;
    entry.apply(spec, None);
    Ok(())
}

/// Parses a `PUT /api/apps/{name}/gpu` body: a GPU request, `true` (optional, any vendor),
/// or `false` / `null` / `{}` (no GPU). A required request without a vendor
/// (`{"runtime":"auto"}`, `{"count":2}`) passes here and is resolved by [`set_gpu`].
pub fn parse_gpu(body: &[u8]) -> ApiResult<Option<GpuRequest>> {
    let value = if body.iter().all(u8::is_ascii_whitespace) {
        Value::Null
    } else {
        parse_json(body)?
    };
    let gpu = match value {
        Value::Null | Value::Bool(false) => None,
        Value::Bool(true) => Some(GpuRequest::default().with_optional(true)),
        v @ Value::Object(_) => {
            let g: GpuRequest = typed(v, "gpu")?;
            (!g.is_empty()).then_some(g)
        }
        _ => {
            return Err(ApiError::bad_request(
                "gpu",
                "gpu: expected a GPU request object, true, false or null",
            ));
        }
    };
    if let Some(g) = &gpu {
        crate::gpu_auto::validate_fields(g)?;
    }
    Ok(gpu)
}

/// `GET /api/hosts`.
pub async fn list_hosts(State(hub): State<Arc<Hub>>) -> Json<Vec<HostView>> {
    Json(hub.hosts())
}

/// `GET /api/hosts/{id}`.
pub async fn get_host(
    State(hub): State<Arc<Hub>>,
    Path(id): Path<String>,
) -> ApiResult<Json<HostView>> {
    hub.host(&id)
        .map(Json)
        .ok_or_else(|| ApiError::unknown_host(&id))
}

/// `POST /api/apps`.
pub async fn create_app(State(hub): State<Arc<Hub>>, body: Bytes) -> ApiResult<Response> {
    let (host, mut spec) = parse_create(&body)?;
    // the catalog's images come from the mirror of `--catalog-registry`, when there is one
    if let (Some(mirror), Some(entry)) = (
        hub.catalog_registry.get(),
        spec.app.as_deref().and_then(catalog::lookup),
    ) && spec.image.as_deref() == Some(entry.image.as_str())
    {
        spec.image = Some(entry.image_on(Some(mirror)));
    }
    let host = crate::placement::pick_host(&hub, host.as_deref())?;
    if spec
        .gpu
        .as_ref()
        .is_some_and(crate::gpu_auto::needs_detection)
    {
        let target = hub
            .host(&host)
            .ok_or_else(|| ApiError::unknown_host(&host))?;
        let label = crate::placement::label(&target);
        (spec.gpu, _) =
            crate::gpu_auto::resolve(spec.gpu.take(), &label, target.inventory.as_deref())?;
    }
    if let Some(inventory) = hub.host(&host).and_then(|t| t.inventory.clone()) {
        spec.check_update_order(Some(inventory.gpus.len()))?;
    }
    let view = hub.create_app(Some(&host), spec).await?;
    Ok((StatusCode::CREATED, Json(view)).into_response())
}

/// `GET /api/apps`.
pub async fn list_apps(State(hub): State<Arc<Hub>>) -> Json<Vec<AppView>> {
    Json(hub.apps())
}

/// `GET /api/apps/{name}`.
pub async fn get_app(
    State(hub): State<Arc<Hub>>,
    Path(name): Path<String>,
) -> ApiResult<Json<AppView>> {
    hub.app(&name)
        .map(Json)
        .ok_or_else(|| ApiError::unknown_app(&name))
}

/// `DELETE /api/apps/{name}`.
pub async fn delete_app(
    State(hub): State<Arc<Hub>>,
    Path(name): Path<String>,
) -> ApiResult<Json<Value>> {
    hub.delete_app(&name).await?;
    Ok(Json(serde_json::json!({ "deleted": name })))
}

/// Answer of `PUT /api/apps/{name}/gpu`.
#[derive(Debug, Serialize)]
pub struct GpuChange {
    /// The app after the change.
    pub app: AppView,
    /// The app is running: the new request applies at the next restart.
    pub restart_required_to_apply: bool,
    /// What automatic vendor detection chose, when the request named no vendor and was not
    /// optional.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detected: Option<crate::placement::Detection>,
}

/// `PUT /api/apps/{name}/gpu`.
pub async fn set_gpu(
    State(hub): State<Arc<Hub>>,
    Path(name): Path<String>,
    body: Bytes,
) -> ApiResult<Json<GpuChange>> {
    let Some(current) = hub.app(&name) else {
        return Err(ApiError::unknown_app(&name));
    };
    let mut gpu = parse_gpu(&body)?;
    let mut detected = None;
    if gpu.as_ref().is_some_and(crate::gpu_auto::needs_detection) {
        let target = hub.host(&current.host);
        let label = target
            .as_ref()
            .map_or_else(|| current.host.clone(), crate::placement::label);
        let (resolved, d) = crate::gpu_auto::resolve(
            gpu.take(),
            &label,
            target.as_ref().and_then(|t| t.inventory.as_deref()),
        )?;
        gpu = resolved;
        detected = d.map(|d| crate::placement::Detection::new(d, &label));
    }
    let app = hub.set_gpu(&name, gpu).await?;
    let running = matches!(
        app.state.as_str(),
        "running" | "restarting" | "crash_loop" | "creating"
    );
    Ok(Json(GpuChange {
        app,
        restart_required_to_apply: running,
        detected,
    }))
}

/// `POST /api/apps/{name}/restart`.
pub async fn restart_app(
    State(hub): State<Arc<Hub>>,
    Path(name): Path<String>,
    body: Bytes,
) -> ApiResult<Json<AppView>> {
    let request = parse_restart(&body)?;
    let app = hub.restart(&name, request.request_id.as_deref()).await?;
    Ok(Json(app))
}

/// The optional body of `POST /api/apps/{name}/restart`.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RestartRequest {
    /// Chosen by the client; a retry with the same id restarts once.
    pub request_id: Option<String>,
}

/// Parses a restart body: empty, `{}` or `{"request_id": "…"}` (1 to 128 printable ASCII
/// characters).
pub fn parse_restart(body: &[u8]) -> ApiResult<RestartRequest> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(RestartRequest::default());
    }
    let request: RestartRequest = typed(parse_json(body)?, "")?;
    if let Some(id) = &request.request_id
        && (id.is_empty() || id.len() > 128 || !id.bytes().all(|b| b.is_ascii_graphic()))
    {
        return Err(ApiError::bad_request(
            "request_id",
            "request_id: must be 1 to 128 printable ascii characters without spaces",
        ));
    }
    Ok(request)
}

/// `GET /api/catalog`.
pub async fn list_catalog() -> Json<&'static [catalog::CatalogEntry]> {
    Json(catalog::entries())
}

/// `GET /api/events/log`: the latest events, oldest first.
pub async fn event_log(State(hub): State<Arc<Hub>>) -> Json<Vec<crate::state::model::EventRecord>> {
    Json(hub.events())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn create_err(body: &str) -> (String, String) {
        let e = parse_create(body.as_bytes()).unwrap_err();
        (e.field.unwrap_or_default(), e.error)
    }

    #[test]
    fn odac_payload_resolves_the_catalog() {
        let (host, spec) = parse_create(
            br#"{"name":"ollama-app","type":"app","app":"ollama","gpu":{"runtime":"nvidia","count":1,"optional":true},"host":"h1"}"#,
        )
        .unwrap();
        assert_eq!(host.as_deref(), Some("h1"));
        assert_eq!(spec.image.as_deref(), Some("ollama/ollama:0.6.2"));
        assert_eq!(spec.app.as_deref(), Some("ollama"));
    }

    #[test]
    fn errors_name_the_protocol_field() {
        for (body, field) in [
            (
                r#"{"name":"a","image":"x","gpu":{"runtime":"nvidia","count":0}}"#,
                "gpu.count",
            ),
            (
                r#"{"name":"a","image":"x","gpu":{"runtime":"cuda"}}"#,
                "gpu.runtime",
            ),
            (r#"{"name":"A","image":"x"}"#, "name"),
            (r#"{"image":"x"}"#, "name"),
            (r#"{"name":"a"}"#, "image"),
            (r#"{"name":"a","app":"nope"}"#, "app"),
            (
                r#"{"name":"a","image":"x","ports":[{"container":0}]}"#,
                "ports[0].container",
            ),
            (
                r#"{"name":"a","image":"x","ports":[{"container":"x"}]}"#,
                "ports[0].container",
            ),
            (r#"{"name":"a","image":"x","host":5}"#, "host"),
            (r#"[1]"#, "body"),
            (r#"{"#, "body"),
            ("", "body"),
        ] {
            let (f, msg) = create_err(body);
            assert_eq!(f, field, "{body}: {msg}");
        }
    }

    #[test]
    fn gpu_bodies() {
        assert_eq!(parse_gpu(b"false").unwrap(), None);
        assert_eq!(parse_gpu(b"null").unwrap(), None);
        assert_eq!(parse_gpu(b"{}").unwrap(), None);
        assert!(parse_gpu(b"true").unwrap().unwrap().is_optional());
        let g = parse_gpu(br#"{"runtime":"amd","count":"all"}"#)
            .unwrap()
            .unwrap();
        assert_eq!(g.effective_vendor(), Some(odac_protocol::Vendor::Amd));
        let e = parse_gpu(br#"{"runtime":"nvidia","count":0}"#).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("gpu.count"));
        assert_eq!(e.error, "gpu.count: 0 is out of range 1..=64");
        assert_eq!(parse_gpu(b"7").unwrap_err().field.as_deref(), Some("gpu"));
    }
}
