//! Registry logins of the control plane (`odac registry login|list|logout`, `/api/registries`):
//! one user name and password per registry host, kept in memory only (never written to the
//! state dir, so never on disk), shown without the password, and sent to an agent inside the
//! spec of every app whose image names that host (`registry_auth`), so the agent can pull it.
//! A login or logout re-sends the apps of that registry.

use odac_agent::lock::lock;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use odac_protocol::{AppSpec, RegistryAuth, registry_host};
use serde::{Deserialize, Serialize};

use crate::server::api_error::ApiError;
use crate::server::body::{parse_json, typed};
use crate::state::hub::Hub;

/// What the API shows of a login: never the password.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegistryView {
    /// Registry host.
    pub host: String,
    /// User name.
    pub username: String,
}

/// The `POST /api/registries` body.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Login {
    host: String,
    username: String,
    password: String,
}

/// The logins, by registry host.
#[derive(Debug, Default)]
pub struct Registries {
    logins: Mutex<BTreeMap<String, RegistryAuth>>,
}

impl Registries {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, RegistryAuth>> {
        lock(&self.logins)
    }

    /// Every login, without passwords.
    pub fn list(&self) -> Vec<RegistryView> {
        self.lock()
            .values()
            .map(|a| RegistryView {
                host: a.server.clone(),
                username: a.username.clone(),
            })
            .collect()
    }

    /// `spec` as sent to its agent: with the login for its image's registry, if any.
    pub fn attach(&self, mut spec: AppSpec) -> AppSpec {
        spec.registry_auth = spec
            .image
            .as_deref()
            .and_then(|image| self.lock().get(registry_host(image)).cloned());
        spec
    }
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
        hub.registries.lock().insert(auth.server.clone(), auth);
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
    if hub.registries.lock().remove(&host).is_none() {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attach_matches_the_image_registry_and_lists_hide_passwords() {
        let r = Registries::default();
        r.lock().insert(
            "127.0.0.1:5000".into(),
            RegistryAuth {
                server: "127.0.0.1:5000".into(),
                username: "u".into(),
                password: "secret-pw".into(),
            },
        );
        let spec = AppSpec::new("a", "127.0.0.1:5000/x:1");
        assert_eq!(
            r.attach(spec).registry_auth.map(|a| a.username),
            Some("u".to_owned())
        );
        assert!(
            r.attach(AppSpec::new("b", "busybox"))
                .registry_auth
                .is_none()
        );
        let json = serde_json::to_string(&r.list()).unwrap_or_default();
        assert!(!json.contains("secret-pw"), "{json}");
    }
}
