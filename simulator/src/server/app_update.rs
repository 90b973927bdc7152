//! `PUT /api/apps/{name}`: an app's whole spec replaced, validated like a create (the same
//! `{error, field}` refusals), on the host it already has. The body's `name` may be left out
//! (the path names the app) but may not name another app; `host`, when given, must be the
//! app's own (an app does not move). A spec without a restart token keeps the app's current
//! one, and a git source without an access token keeps the stored one when the URL is the
//! same: a spec read back from `GET /api/apps/{name}` (which never shows either secret)
//! changes only what the caller changed. The host's generation moves on when the spec
//! changed; a PUT of the same spec changes nothing.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use serde_json::Value;

use crate::catalog;
use crate::server::api::parse_create;
use crate::server::api_error::ApiError;
use crate::server::body::parse_json;
use crate::state::hub::Hub;
use crate::state::views::AppView;

/// `PUT /api/apps/{name}`.
pub async fn replace_app(
    State(hub): State<Arc<Hub>>,
    Path(name): Path<String>,
    body: Bytes,
) -> Result<Json<AppView>, ApiError> {
    let Some(current) = hub.app(&name) else {
        return Err(ApiError::unknown_app(&name));
    };
    let body = with_name(&body, &name)?;
    let (host, mut spec) = parse_create(&body)?;
    if let Some(h) = host.as_deref()
        && h != current.host
        && h != current.hostname
    {
        return Err(ApiError::bad_request(
            "host",
            format!(
                "host: app {name} runs on {}; an app does not move: remove it and create it on {h}",
                current.host
            ),
        ));
    }
    // the catalog's images come from the mirror of `--catalog-registry`, as at create
    if let (Some(mirror), Some(entry)) = (
        hub.catalog_registry.get(),
        spec.app.as_deref().and_then(catalog::lookup),
    ) && spec.image.as_deref() == Some(entry.image.as_str())
    {
        spec.image = Some(entry.image_on(Some(mirror)));
    }
    if spec
        .gpu
        .as_ref()
        .is_some_and(crate::gpu_auto::needs_detection)
    {
        let target = hub.host(&current.host);
        let label = target
            .as_ref()
            .map_or_else(|| current.host.clone(), crate::placement::label);
        (spec.gpu, _) = crate::gpu_auto::resolve(
            spec.gpu.take(),
            &label,
            target.as_ref().and_then(|t| t.inventory.as_deref()),
        )?;
    }
    if let Some(inventory) = hub.host(&current.host).and_then(|t| t.inventory.clone()) {
        spec.check_update_order(Some(inventory.gpus.len()))?;
    }
    Ok(Json(hub.replace_spec(&name, spec).await?))
}

/// The body with `name` set to the path's app when absent; refused when it names another.
fn with_name(body: &[u8], name: &str) -> Result<Vec<u8>, ApiError> {
    let mut value = parse_json(body)?;
    if let Value::Object(map) = &mut value {
        match map.get("name") {
            None | Some(Value::Null) => {
                map.insert("name".to_owned(), Value::String(name.to_owned()));
            }
            Some(Value::String(n)) if n != name => {
                return Err(ApiError::bad_request(
                    "name",
                    format!(
                        "name: the body names app {n:?} but the path app {name:?}; an app is not renamed"
                    ),
                ));
            }
            Some(_) => {}
        }
    }
    serde_json::to_vec(&value).map_err(|e| ApiError::bad_request("body", format!("body: {e}")))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn the_name_comes_from_the_path_and_may_not_change() {
        let body = with_name(br#"{"image":"busybox:2"}"#, "web").unwrap();
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["name"], "web");
        let e = with_name(br#"{"name":"other","image":"x"}"#, "web").unwrap_err();
        assert_eq!(e.field.as_deref(), Some("name"));
        assert!(e.error.contains("\"other\""), "{}", e.error);
        assert!(with_name(br#"{"name":"web","image":"x"}"#, "web").is_ok());
        assert_eq!(
            with_name(b"{", "web").unwrap_err().field.as_deref(),
            Some("body")
        );
    }
}
