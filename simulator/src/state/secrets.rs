//! Git secrets at rest. No state file (`fleet.json`, `apps/`) holds an app's `source.secret`
//! in clear: on save it is sealed with ChaCha20-Poly1305 (ring) under a key kept apart in
//! `DIR/secrets.key` (32 random bytes, hex, mode 0600, created at first start), with a fresh
//! nonce per seal and the app's name as associated data, so a sealed secret cannot be moved
//! to another app. A copy of the state dir (a backup, a bug report) therefore reveals no
//! secret; the agents still receive the secret in their desired state, and the REST API never
//! returns it. Registry passwords are sealed the same way (`registries.rs`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};

use crate::error::SimError;

/// File name of the sealing key in the state dir.
pub const KEY_FILE: &str = "secrets.key";

const PREFIX: &str = "v1:";

/// Seals and opens git secrets with the state dir's key.
#[derive(Clone)]
pub struct Sealer {
    key: Arc<LessSafeKey>,
    path: PathBuf,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sealer")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

fn bad_key(path: &Path, why: &str) -> SimError {
    SimError::Parse {
        path: path.to_owned(),
        message: format!(
            "{why}; it must hold 64 hex digits (delete it only if no sealed secret is needed any more)"
        ),
    }
}

impl Sealer {
    /// The sealer of `dir`, creating its key on first use.
    pub fn load_or_create(dir: &Path) -> Result<Self, SimError> {
        let path = dir.join(KEY_FILE);
        let bytes = match std::fs::read_to_string(&path) {
            Ok(text) => hex::decode(text.trim()).map_err(|_| bad_key(&path, "not hex"))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let mut key = [0u8; 32];
                SystemRandom::new()
                    .fill(&mut key)
                    .map_err(|_| SimError::Tls("no randomness for the secrets key".into()))?;
                crate::files::write_file(
                    &path,
                    format!("{}\n", hex::encode(key)).as_bytes(),
                    0o600,
                )?;
                key.to_vec()
            }
            Err(e) => return Err(SimError::io("read", &path, e)),
        };
        let key = UnboundKey::new(&CHACHA20_POLY1305, &bytes)
            .map_err(|_| bad_key(&path, "wrong length"))?;
        Ok(Self {
            key: Arc::new(LessSafeKey::new(key)),
            path,
        })
    }

    /// The key file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `secret` of app `app`, sealed: `v1:<nonce hex>:<ciphertext+tag hex>`.
    pub fn seal(&self, app: &str, secret: &str) -> Result<String, SimError> {
        let mut nonce = [0u8; NONCE_LEN];
        SystemRandom::new()
            .fill(&mut nonce)
            .map_err(|_| SimError::Tls("no randomness for a nonce".into()))?;
        let mut buf = secret.as_bytes().to_vec();
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(app.as_bytes()),
                &mut buf,
            )
            .map_err(|_| SimError::Tls("cannot seal a git secret".into()))?;
        Ok(format!(
            "{PREFIX}{}:{}",
            hex::encode(nonce),
            hex::encode(buf)
        ))
    }

    /// Opens what [`Sealer::seal`] made for `app`; `None` when it was sealed under another
    /// key, for another app, or altered.
    pub fn open(&self, app: &str, sealed: &str) -> Option<String> {
        let (nonce, data) = sealed.strip_prefix(PREFIX)?.split_once(':')?;
        let nonce: [u8; NONCE_LEN] = hex::decode(nonce).ok()?.try_into().ok()?;
        let mut buf = hex::decode(data).ok()?;
        let plain = self
            .key
            .open_in_place(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(app.as_bytes()),
                &mut buf,
            )
            .ok()?;
        String::from_utf8(plain.to_vec()).ok()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn seals_open_only_with_the_same_key_and_app() {
        let dir = tempfile::tempdir().unwrap();
        let s = Sealer::load_or_create(dir.path()).unwrap();
        let sealed = s.seal("web", "ghp_secret").unwrap();
        assert!(!sealed.contains("ghp_secret"));
        assert_ne!(sealed, s.seal("web", "ghp_secret").unwrap(), "fresh nonce");
        assert_eq!(s.open("web", &sealed).as_deref(), Some("ghp_secret"));
        assert_eq!(s.open("api", &sealed), None, "bound to the app");
        let again = Sealer::load_or_create(dir.path()).unwrap();
        assert_eq!(again.open("web", &sealed).as_deref(), Some("ghp_secret"));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(s.path()).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let other = tempfile::tempdir().unwrap();
        let stranger = Sealer::load_or_create(other.path()).unwrap();
        assert_eq!(stranger.open("web", &sealed), None);
        assert_eq!(s.open("web", "v1:zz:zz"), None);
        std::fs::write(s.path(), "abc").unwrap();
        assert!(Sealer::load_or_create(dir.path()).is_err());
    }
}
