//! Registry credentials for pulls, from two places: those the control plane sent (kept in
//! memory only, one per registry host) and the host's own `docker login` credentials, the
//! `auths` of the Docker client's `config.json` (`apps.docker_config`, read on every pull so
//! a new `docker login` counts without a restart). Control-plane credentials win. A
//! `credsStore` or `credHelpers` entry is not run: it is reported as unsupported, once per
//! helper. Passwords never reach a log line, an error or a `Debug` output: a `config.json`
//! that does not parse is reported by the kind and position of the error, never serde's own
//! words (which quote the offending value, the base64 of `user:password`).
//!
//! `config.json` is read without blocking the runtime: [`Credentials::lookup`] reads it on
//! the blocking pool, through [`bounded_read`](crate::bounded_read) (a FIFO, a directory or a
//! file over [`MAX_DOCKER_CONFIG`] is refused with a warning, and the pull goes on without).

use odac_host::lock::lock;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use serde::Deserialize;

use crate::bounded_read::{BoundedReadError, read_regular};
use odac_host::engine::RegistryAuth;

/// The largest docker `config.json` read (a real one is a few KiB).
pub const MAX_DOCKER_CONFIG: u64 = 1024 * 1024;

/// The credential sources of one app manager; cheap to clone (shared).
#[derive(Debug, Clone, Default)]
pub struct Credentials {
    sent: Arc<Mutex<BTreeMap<String, RegistryAuth>>>,
    warned: Arc<Mutex<BTreeSet<String>>>,
    docker_config: Option<PathBuf>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct DockerConfig {
    #[serde(default)]
    auths: BTreeMap<String, DockerAuth>,
    #[serde(default)]
    creds_store: Option<String>,
    #[serde(default)]
    cred_helpers: BTreeMap<String, String>,
}

#[derive(Default, Deserialize)]
struct DockerAuth {
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
}

/// The host part of an `auths` key: `https://h:5000/v1/` → `h:5000`.
fn key_host(key: &str) -> &str {
    let key = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    key.split('/').next().unwrap_or(key)
}

/// The Docker Hub's names in `config.json`.
fn same_registry(key: &str, host: &str) -> bool {
    let key = key_host(key);
    let hub = |h: &str| matches!(h, "docker.io" | "index.docker.io" | "registry-1.docker.io");
    key == host || (hub(key) && hub(host))
}

impl Credentials {
    /// Credentials from the control plane only, plus `config.json` at `docker_config` when
    /// given.
    pub fn new(docker_config: Option<PathBuf>) -> Self {
        Self {
            docker_config,
            ..Self::default()
        }
    }

    /// Replace the control plane's credentials (one per registry host).
    pub fn set_sent(&self, auths: Vec<RegistryAuth>) {
        *lock(&self.sent) = auths.into_iter().map(|a| (a.server.clone(), a)).collect();
    }

    /// The registry hosts the control plane sent credentials for.
    pub fn sent_hosts(&self) -> Vec<String> {
        lock(&self.sent).keys().cloned().collect()
    }

    /// [`Credentials::for_host`] on the blocking pool: reading `config.json` never holds a
    /// runtime worker.
    pub async fn lookup(&self, host: &str) -> Option<RegistryAuth> {
        if let Some(a) = lock(&self.sent).get(host) {
            return Some(a.clone());
        }
        self.docker_config.as_ref()?;
        let (this, host) = (self.clone(), host.to_owned());
        tokio::task::spawn_blocking(move || this.for_host(&host))
            .await
            .ok()
            .flatten()
    }

    /// The credentials for registry `host`, if any (reads `config.json`: blocking; on the
    /// runtime use [`Credentials::lookup`]).
    pub fn for_host(&self, host: &str) -> Option<RegistryAuth> {
        if let Some(a) = lock(&self.sent).get(host) {
            return Some(a.clone());
        }
        let path = self.docker_config.as_deref()?;
        self.read_docker_config(path, host)
    }

    fn read_docker_config(&self, path: &Path, host: &str) -> Option<RegistryAuth> {
        let text = match read_regular(path, MAX_DOCKER_CONFIG) {
            Ok(t) => t,
            Err(BoundedReadError::NotFound(_)) => return None,
            Err(e) => {
                self.warn_once(path.display().to_string(), || {
                    format!(
                        "cannot read docker credentials {} (apps.docker_config): {e}",
                        path.display()
                    )
                });
                return None;
            }
        };
        let config: DockerConfig = match serde_json::from_slice(&text) {
            Ok(c) => c,
            Err(e) => {
                self.warn_once(path.display().to_string(), || {
                    format!(
                        "cannot parse docker credentials {}: {}",
                        path.display(),
                        parse_error(&e)
                    )
                });
                return None;
            }
        };
        if let Some(found) = config
            .auths
            .iter()
            .find(|(k, _)| same_registry(k, host))
            .and_then(|(_, auth)| decode(auth, host))
        {
            return Some(found);
        }
        let helper = config
            .cred_helpers
            .iter()
            .find(|(k, _)| same_registry(k, host))
            .map(|(_, h)| h.clone())
            .or(config.creds_store);
        if let Some(helper) = helper {
            self.warn_once(format!("helper {helper}"), || {
                format!(
                    "credential helper docker-credential-{helper} in {} is unsupported: run `docker login` without a credential store, or send the credentials from the control plane (odac registry login)",
                    path.display()
                )
            });
        }
        None
    }

    fn warn_once(&self, key: String, message: impl FnOnce() -> String) {
        if lock(&self.warned).insert(key) {
            tracing::warn!("{}", message());
        }
    }
}

/// A `config.json` parse error without serde's words: `invalid type: string "<the base64 of
/// user:password>", expected …` would put the credential in a log line.
fn parse_error(e: &serde_json::Error) -> String {
    let what = match e.classify() {
        serde_json::error::Category::Io => "cannot be read",
        serde_json::error::Category::Syntax => "is not valid json",
        serde_json::error::Category::Data => "does not have the expected shape",
        serde_json::error::Category::Eof => "ends early",
    };
    format!(
        "the file {what} (line {}, column {}; content not shown)",
        e.line(),
        e.column()
    )
}

/// The user and password of an `auths` entry: `auth` is base64 of `user:password`.
fn decode(auth: &DockerAuth, host: &str) -> Option<RegistryAuth> {
    if let (Some(u), Some(p)) = (&auth.username, &auth.password) {
        return Some(RegistryAuth {
            server: host.to_owned(),
            username: u.clone(),
            password: p.clone(),
        });
    }
    let raw = base64::engine::general_purpose::STANDARD
        .decode(auth.auth.as_deref()?.trim())
        .ok()?;
    let text = String::from_utf8(raw).ok()?;
    let (user, password) = text.split_once(':')?;
    Some(RegistryAuth {
        server: host.to_owned(),
        username: user.to_owned(),
        password: password.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::sync::mpsc;
    use std::time::Duration;

    #[derive(Clone, Default)]
    struct Capture(Arc<Mutex<Vec<u8>>>);

    impl Write for Capture {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            lock(&self.0).extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// What `f` logs, at every level.
    fn logged(f: impl FnOnce()) -> String {
        let capture = Capture::default();
        let sink = capture.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_ansi(false)
            .with_writer(move || sink.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, f);
        String::from_utf8_lossy(&lock(&capture.0)).into_owned()
    }

    #[test]
    fn a_malformed_config_never_quotes_its_credentials() {
        let dir = tempfile::tempdir().unwrap();
        let b64 = base64::engine::general_purpose::STANDARD.encode("alice:s3cret-pw");
        for json in [
            format!(r#"{{"auths":"{b64}"}}"#),
            format!(r#"{{"auths":{{"h:1":{{"auth":["{b64}"]}}}}}}"#),
            format!(r#"{{"auths":{{"h:1":{{"username":"alice","password":7,"x":"{b64}"}}}}}}"#),
        ] {
            let path = write(dir.path(), &json);
            let lines = logged(|| assert!(Credentials::new(Some(path)).for_host("h:1").is_none()));
            assert!(lines.contains("cannot parse docker credentials"), "{lines}");
            assert!(lines.contains("content not shown"), "{lines}");
            assert!(
                !lines.contains(&b64) && !lines.contains("s3cret") && !lines.contains("alice"),
                "{lines}"
            );
        }
    }

    #[test]
    fn a_fifo_or_directory_at_docker_config_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("config.json");
        let status = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(status.success());
        let (tx, rx) = mpsc::channel();
        let path = fifo.clone();
        std::thread::spawn(move || {
            let lines = logged(|| {
                let _ = tx.send(Credentials::new(Some(path)).for_host("h:1").is_none());
            });
            let _ = tx.send(lines.contains("is a fifo, not a regular file"));
        });
        // the old blocking read never returned: the open of a FIFO waits for a writer
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(true), "none");
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(true), "warned");
        let lines = logged(|| {
            assert!(
                Credentials::new(Some(dir.path().to_owned()))
                    .for_host("h:1")
                    .is_none()
            );
        });
        assert!(lines.contains("is a directory"), "{lines}");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn lookup_reads_the_config_off_the_runtime() {
        let dir = tempfile::tempdir().unwrap();
        let b64 = base64::engine::general_purpose::STANDARD.encode("alice:pw");
        let path = write(
            dir.path(),
            &format!(r#"{{"auths":{{"h:1":{{"auth":"{b64}"}}}}}}"#),
        );
        let creds = Credentials::new(Some(path));
        assert_eq!(creds.lookup("h:1").await.unwrap().username, "alice");
        assert!(creds.lookup("h:2").await.is_none());
    }

    fn write(dir: &Path, json: &str) -> PathBuf {
        let path = dir.join("config.json");
        std::fs::write(&path, json).unwrap();
        path
    }

    #[test]
    fn docker_config_auths_are_read_and_sent_ones_win() {
        let dir = tempfile::tempdir().unwrap();
        // "alice:pw:with:colons"
        let b64 = base64::engine::general_purpose::STANDARD.encode("alice:pw:with:colons");
        let path = write(
            dir.path(),
            &format!(
                r#"{{"auths":{{"127.0.0.1:5000":{{"auth":"{b64}"}},"https://index.docker.io/v1/":{{"auth":"{b64}"}}}}}}"#
            ),
        );
        let creds = Credentials::new(Some(path));
        let a = creds.for_host("127.0.0.1:5000").unwrap();
        assert_eq!(
            (a.username.as_str(), a.password.as_str()),
            ("alice", "pw:with:colons")
        );
        assert!(creds.for_host("docker.io").is_some());
        assert!(creds.for_host("other:1").is_none());
        creds.set_sent(vec![RegistryAuth {
            server: "127.0.0.1:5000".into(),
            username: "bob".into(),
            password: "x".into(),
        }]);
        assert_eq!(creds.for_host("127.0.0.1:5000").unwrap().username, "bob");
        assert_eq!(creds.sent_hosts(), vec!["127.0.0.1:5000".to_owned()]);
    }

    #[test]
    fn helpers_missing_and_broken_files_give_none() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), r#"{"credsStore":"desktop","auths":{"h:1":{}}}"#);
        assert!(Credentials::new(Some(path)).for_host("h:1").is_none());
        let path = write(dir.path(), "{not json");
        assert!(Credentials::new(Some(path)).for_host("h:1").is_none());
        let missing = dir.path().join("nope.json");
        assert!(Credentials::new(Some(missing)).for_host("h:1").is_none());
        assert!(Credentials::new(None).for_host("h:1").is_none());
    }
}
