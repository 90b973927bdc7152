//! Registry logins of the control plane (`odac registry login|list|logout`, `/api/registries`):
//! one user name and password per registry host, shown without the password, and sent to an
//! agent inside the spec of every app whose image names that host (`registry_auth`), so the
//! agent can pull it. A login or logout re-sends the apps of that registry
//! (`server/registries.rs`, which checks a login against its registry first:
//! `server/registry_check.rs`). Each login records whether that check verified it.
//!
//! The logins survive a restart: they are kept in `DIR/registries.json` with every password
//! sealed like the git secrets (`secrets.rs`, the state dir's key, the registry host as
//! associated data), so the file never holds one in clear. A password that does not open (the
//! key file was replaced) drops that login with an error naming the registry.

use odac_host::lock::lock;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, OnceLock};

use odac_protocol::{AppSpec, RegistryAuth, registry_host};
use serde::{Deserialize, Serialize};

use crate::error::SimError;
use crate::state::secrets::Sealer;

/// File name of the logins in the state dir.
pub const FILE: &str = "registries.json";

/// What the API shows of a login: never the password.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegistryView {
    /// Registry host.
    pub host: String,
    /// User name.
    pub username: String,
    /// Whether the control plane checked the credentials against the registry.
    #[serde(default)]
    pub verified: bool,
    /// Why not, when not verified.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// One login: the credentials and what the check said.
#[derive(Debug, Clone)]
struct Login {
    auth: RegistryAuth,
    verified: bool,
    note: Option<String>,
}

/// One login as written to [`FILE`]: the password sealed.
#[derive(Serialize, Deserialize)]
struct Stored {
    host: String,
    username: String,
    sealed_password: String,
    #[serde(default)]
    verified: bool,
    #[serde(default)]
    note: Option<String>,
}

/// Where the logins are kept.
#[derive(Debug)]
struct Backing {
    path: PathBuf,
    sealer: Sealer,
}

/// The associated data a password of registry `host` is sealed with.
fn aad(host: &str) -> String {
    format!("registry:{host}")
}

/// The logins, by registry host.
#[derive(Debug, Default)]
pub struct Registries {
    logins: Mutex<BTreeMap<String, Login>>,
    backing: OnceLock<Backing>,
}

impl Registries {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, Login>> {
        lock(&self.logins)
    }

    /// Loads the logins kept in `dir` (none when the file is missing) and keeps every later
    /// change there, passwords sealed with `sealer`.
    pub fn load(&self, dir: &Path, sealer: Sealer) -> Result<(), SimError> {
        let path = dir.join(FILE);
        let stored: Vec<Stored> = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| SimError::Parse {
                path: path.clone(),
                message: e.to_string(),
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(SimError::io("read", &path, e)),
        };
        {
            let mut logins = self.lock();
            for s in stored {
                let Some(password) = sealer.open(&aad(&s.host), &s.sealed_password) else {
                    tracing::error!(
                        registry = %s.host,
                        "the registry login's password could not be unsealed with {}; log in to it again",
                        sealer.path().display()
                    );
                    continue;
                };
                let auth = RegistryAuth {
                    server: s.host.clone(),
                    username: s.username,
                    password,
                };
                logins.insert(
                    s.host,
                    Login {
                        auth,
                        verified: s.verified,
                        note: s.note,
                    },
                );
            }
        }
        let _ = self.backing.set(Backing { path, sealer });
        Ok(())
    }

    /// Writes the logins to their file (nothing without [`Registries::load`]).
    fn save(&self, logins: &BTreeMap<String, Login>) -> Result<(), SimError> {
        let Some(backing) = self.backing.get() else {
            return Ok(());
        };
        let stored = logins
            .values()
            .map(|l| {
                Ok(Stored {
                    host: l.auth.server.clone(),
                    username: l.auth.username.clone(),
                    sealed_password: backing
                        .sealer
                        .seal(&aad(&l.auth.server), &l.auth.password)?,
                    verified: l.verified,
                    note: l.note.clone(),
                })
            })
            .collect::<Result<Vec<_>, SimError>>()?;
        let json = serde_json::to_vec_pretty(&stored).map_err(|e| SimError::Parse {
            path: backing.path.clone(),
            message: e.to_string(),
        })?;
        crate::files::write_file(&backing.path, &json, 0o600)
    }

    /// Adds or replaces the login of its registry host, saying whether it was verified (and
    /// why not), and keeps it. (Blocking file IO: call it off the runtime's workers.)
    pub fn insert(
        &self,
        auth: RegistryAuth,
        verified: bool,
        note: Option<String>,
    ) -> Result<(), SimError> {
        let mut logins = self.lock();
        logins.insert(
            auth.server.clone(),
            Login {
                auth,
                verified,
                note,
            },
        );
        self.save(&logins)
    }

    /// Removes the login of `host`; `false` when there was none. (Blocking file IO.)
    pub fn remove(&self, host: &str) -> Result<bool, SimError> {
        let mut logins = self.lock();
        if logins.remove(host).is_none() {
            return Ok(false);
        }
        self.save(&logins).map(|()| true)
    }

    /// Every login, without passwords.
    pub fn list(&self) -> Vec<RegistryView> {
        self.lock()
            .values()
            .map(|l| RegistryView {
                host: l.auth.server.clone(),
                username: l.auth.username.clone(),
                verified: l.verified,
                note: l.note.clone(),
            })
            .collect()
    }

    /// `spec` as sent to its agent: with the login for its image's registry, if any.
    pub fn attach(&self, mut spec: AppSpec) -> AppSpec {
        spec.registry_auth = spec.image.as_deref().and_then(|image| {
            self.lock()
                .get(registry_host(image))
                .map(|l| l.auth.clone())
        });
        spec
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn auth(host: &str, password: &str) -> RegistryAuth {
        RegistryAuth {
            server: host.into(),
            username: "u".into(),
            password: password.into(),
        }
    }

    #[test]
    fn attach_matches_the_image_registry_and_lists_hide_passwords() {
        let r = Registries::default();
        r.insert(auth("127.0.0.1:5000", "secret-pw"), true, None)
            .unwrap();
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

    #[test]
    fn logins_survive_a_reload_sealed_and_a_foreign_key_drops_them() {
        let dir = tempfile::tempdir().unwrap();
        let sealer = Sealer::load_or_create(dir.path()).unwrap();
        let r = Registries::default();
        r.load(dir.path(), sealer.clone()).unwrap();
        r.insert(auth("127.0.0.1:5000", "sealed-pw-1"), true, None)
            .unwrap();
        let note = Some("the control plane cannot reach it".to_owned());
        r.insert(auth("reg.example:443", "sealed-pw-2"), false, note.clone())
            .unwrap();
        let text = std::fs::read_to_string(dir.path().join(FILE)).unwrap();
        assert!(!text.contains("sealed-pw"), "{text}");

        let again = Registries::default();
        again.load(dir.path(), sealer.clone()).unwrap();
        assert_eq!(again.list(), r.list());
        assert_eq!(again.list()[1].note, note);
        let spec = again.attach(AppSpec::new("a", "127.0.0.1:5000/x:1"));
        assert_eq!(spec.registry_auth.unwrap().password, "sealed-pw-1");
        assert!(again.remove("127.0.0.1:5000").unwrap());
        assert!(!again.remove("127.0.0.1:5000").unwrap());
        let third = Registries::default();
        third.load(dir.path(), sealer).unwrap();
        assert_eq!(third.list().len(), 1);

        let other = tempfile::tempdir().unwrap();
        std::fs::copy(dir.path().join(FILE), other.path().join(FILE)).unwrap();
        let stranger = Registries::default();
        stranger
            .load(other.path(), Sealer::load_or_create(other.path()).unwrap())
            .unwrap();
        assert!(stranger.list().is_empty());
        std::fs::write(other.path().join(FILE), "{").unwrap();
        let broken = Registries::default();
        let err = broken
            .load(other.path(), Sealer::load_or_create(other.path()).unwrap())
            .unwrap_err();
        assert!(err.to_string().contains(FILE), "{err}");
    }
}
