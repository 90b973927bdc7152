//! The registry-login endpoints (`/api/registries`, `odac registry login|list|logout`): a
//! login is checked against its registry where the control plane can reach it
//! (`registry_check.rs`); a login or logout changes the control plane's logins
//! (`state/registries.rs`, kept sealed in the state dir) and sends again every app whose image
//! names that registry.

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
use crate::server::registry_check::{Check, check};
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

/// `POST /api/registries` `{host, username, password}`: checks the credentials against the
/// registry (`registry_check.rs`); refused ones are answered 422 and not stored; others are
/// stored (replacing a login of the host), verified or with the reason they were not, and the
/// apps of that registry are sent again with them.
pub async fn login(State(hub): State<Arc<Hub>>, body: Bytes) -> Response {
    let parsed = (|| {
        let login: Login = typed(parse_json(&body)?, "")?;
        let auth = RegistryAuth {
            server: login.host,
            username: login.username,
            password: login.password,
        };
        auth.validate().map_err(ApiError::from)?;
        Ok::<_, ApiError>(auth)
    })();
    let auth = match parsed {
        Ok(auth) => auth,
        Err(e) => return e.into_response(),
    };
    let (verified, note) = match check(&auth).await {
        Check::Verified => (true, None),
        Check::Refused(why) => {
            return ApiError {
                status: StatusCode::UNPROCESSABLE_ENTITY,
                error: format!(
                    "registry {} refused the login: {why}; nothing was stored",
                    auth.server
                ),
                field: Some("password".to_owned()),
            }
            .into_response();
        }
        Check::NotVerified(why) => (false, Some(why)),
    };
    let view = RegistryView {
        host: auth.server.clone(),
        username: auth.username.clone(),
        verified,
        note: note.clone(),
    };
    let keeper = Arc::clone(&hub);
    let saved = tokio::task::spawn_blocking(move || keeper.registries.insert(auth, verified, note))
        .await
        .map_err(|e| e.to_string())
        .and_then(|r| r.map_err(|e| e.to_string()));
    if let Err(why) = saved {
        return ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot keep the login of {}: {why}", view.host),
        )
        .into_response();
    }
    hub.resend_registry_apps(&view.host).await;
    (StatusCode::CREATED, Json(view)).into_response()
}

/// `GET /api/registries`: the logins, without passwords.
pub async fn list(State(hub): State<Arc<Hub>>) -> Json<Vec<RegistryView>> {
    Json(hub.registries.list())
}

/// `DELETE /api/registries/{host}`: log out; 404 when there was no login.
pub async fn logout(State(hub): State<Arc<Hub>>, Path(host): Path<String>) -> Response {
    let keeper = Arc::clone(&hub);
    let gone = host.clone();
    let removed = tokio::task::spawn_blocking(move || keeper.registries.remove(&gone))
        .await
        .map_err(|e| e.to_string())
        .and_then(|r| r.map_err(|e| e.to_string()));
    let removed = match removed {
        Ok(removed) => removed,
        Err(why) => {
            return ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("cannot forget the login of {host}: {why}"),
            )
            .into_response();
        }
    };
    if !removed {
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
