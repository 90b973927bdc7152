//! The registry-login endpoints (`/api/registries`, `odac registry login|list|logout`): a
//! login or logout changes the control plane's logins (`state/registries.rs`, in memory only)
//! and sends again every app whose image names that registry.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use odac_protocol::RegistryAuth;
use serde::Deserialize;

use crate::server::api_error::ApiError;
use crate::server::body::{parse_json, typed};
use crate::state::hub::Hub;
use crate::state::registries::RegistryView;

/// The `POST /api/registries` body.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Login {
    host: String,
    username: String,
    password: String,
}

/// `POST /api/registries` `{host, username, password}`: log in (replacing a login of the
/// host); the apps of that registry are sent again with it.
pub async fn login(State(hub): State<Arc<Hub>>, body: Bytes) -> Response {
    let result = (|| {
        let login: Login = typed(parse_json(&body)?, "")?;
        let auth = RegistryAuth {
            server: login.host,
            username: login.username,
            password: login.password,
        };
        auth.validate().map_err(ApiError::from)?;
        let view = RegistryView {
            host: auth.server.clone(),
            username: auth.username.clone(),
        };
        hub.registries.insert(auth);
        Ok::<_, ApiError>(view)
    })();
    match result {
        Ok(view) => {
            hub.resend_registry_apps(&view.host).await;
            (StatusCode::CREATED, Json(view)).into_response()
        }
        Err(e) => e.into_response(),
    }
}

/// `GET /api/registries`: the logins, without passwords.
pub async fn list(State(hub): State<Arc<Hub>>) -> Json<Vec<RegistryView>> {
    Json(hub.registries.list())
}

/// `DELETE /api/registries/{host}`: log out; 404 when there was no login.
pub async fn logout(State(hub): State<Arc<Hub>>, Path(host): Path<String>) -> Response {
    if !hub.registries.remove(&host) {
        return ApiError {
            status: StatusCode::NOT_FOUND,
            error: format!("no login for registry {host:?}"),
            field: Some("host".to_owned()),
        }
        .into_response();
    }
    hub.resend_registry_apps(&host).await;
    StatusCode::NO_CONTENT.into_response()
}
