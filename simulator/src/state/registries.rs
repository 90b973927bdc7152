//! Registry logins of the control plane (`odac registry login|list|logout`, `/api/registries`):
//! one user name and password per registry host, kept in memory only (never written to the
//! state dir, so never on disk), shown without the password, and sent to an agent inside the
//! spec of every app whose image names that host (`registry_auth`), so the agent can pull it.
//! A login or logout re-sends the apps of that registry (`server/registries.rs`).

use odac_agent::lock::lock;
use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use odac_protocol::{AppSpec, RegistryAuth, registry_host};
use serde::{Deserialize, Serialize};

/// What the API shows of a login: never the password.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegistryView {
    /// Registry host.
    pub host: String,
    /// User name.
    pub username: String,
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

    /// Adds or replaces the login of its registry host.
    pub fn insert(&self, auth: RegistryAuth) {
        self.lock().insert(auth.server.clone(), auth);
    }

    /// Removes the login of `host`; `false` when there was none.
    pub fn remove(&self, host: &str) -> bool {
        self.lock().remove(host).is_some()
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
