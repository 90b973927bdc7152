//! The disk check before a pull: the image's compressed size, read from its manifest through
//! the registry's HTTP API (`GET /v2/<name>/manifests/<tag>`, basic or bearer-token auth, a
//! manifest list resolved to this host's platform), against the free space of the engine's
//! data root plus a reserve (`apps.pull_disk_reserve_mb`). Too little space fails the pull
//! with a message saying so, before a byte is downloaded. When the size or the free space
//! cannot be read, the pull goes ahead (the engine then reports what it meets). The requests
//! go through the agent's one HTTP client, [`crate::http_client`].

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use serde::Deserialize;

use crate::engine::{RegistryAuth, registry_host, split_reference};
use crate::http_client;

/// Longest the manifest requests may take together.
const TIMEOUT: Duration = Duration::from_secs(20);
/// Largest manifest read.
const MAX_MANIFEST: usize = 4 * 1024 * 1024;
const ACCEPT: &str = "application/vnd.docker.distribution.manifest.v2+json, application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.list.v2+json, application/vnd.oci.image.index.v1+json";

#[derive(Deserialize)]
struct Blob {
    #[serde(default)]
    size: u64,
}

#[derive(Deserialize)]
struct Platform {
    #[serde(default)]
    architecture: String,
    #[serde(default)]
    os: String,
}

#[derive(Deserialize)]
struct Entry {
    digest: String,
    platform: Option<Platform>,
}

#[derive(Deserialize)]
struct Manifest {
    config: Option<Blob>,
    #[serde(default)]
    layers: Vec<Blob>,
    #[serde(default)]
    manifests: Vec<Entry>,
}

/// The engine's name of this machine's architecture.
fn arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// `name=value` pairs of a `WWW-Authenticate: Bearer …` challenge.
fn challenge_param(header: &str, name: &str) -> Option<String> {
    let start = header.find(&format!("{name}=\""))? + name.len() + 2;
    let end = header[start..].find('"')? + start;
    Some(header[start..end].to_owned())
}

struct Fetcher {
    tls: Arc<rustls::ClientConfig>,
    base: String,
    basic: Option<String>,
    bearer: Option<String>,
    deadline: tokio::time::Instant,
}

impl Fetcher {
    /// GET `url` with `authorization` through the shared [`http_client`], within what is left
    /// of [`TIMEOUT`].
    async fn call(
        &self,
        url: String,
        authorization: Option<String>,
    ) -> Result<http_client::Response, String> {
        let left = self
            .deadline
            .saturating_duration_since(tokio::time::Instant::now());
        let mut request = http_client::Request::get(url, MAX_MANIFEST, left)
            .header(hyper::header::ACCEPT, ACCEPT);
        if let Some(value) = authorization {
            request = request.header(hyper::header::AUTHORIZATION, value);
        }
        http_client::send(&self.tls, request)
            .await
            .map_err(|e| e.to_string())
    }

    async fn get(&mut self, path: &str) -> Result<Manifest, String> {
        for _ in 0..2 {
            let authorization = match (&self.bearer, &self.basic) {
                (Some(token), _) => Some(format!("Bearer {token}")),
                (None, Some(basic)) => Some(format!("Basic {basic}")),
                (None, None) => None,
            };
            let response = self
                .call(format!("{}{path}", self.base), authorization)
                .await?;
            if response.status == 401 && self.bearer.is_none() {
                let header = response
                    .header_str("www-authenticate")
                    .unwrap_or_default()
                    .to_owned();
                if header.to_ascii_lowercase().starts_with("bearer") {
                    self.bearer = Some(self.token(&header).await?);
                    continue;
                }
                return Err(format!("{path}: http 401"));
            }
            if response.status != 200 {
                return Err(format!("{path}: http {}", response.status));
            }
            return serde_json::from_slice(&response.body).map_err(|e| format!("{path}: {e}"));
        }
        Err(format!("{path}: refused after authenticating"))
    }

    async fn token(&self, challenge: &str) -> Result<String, String> {
        #[derive(Deserialize)]
        struct Token {
            token: Option<String>,
            access_token: Option<String>,
        }
        let realm = challenge_param(challenge, "realm").ok_or("no realm in the challenge")?;
        let mut url = realm.clone();
        for name in ["service", "scope"] {
            if let Some(v) = challenge_param(challenge, name) {
                let sep = if url.contains('?') { '&' } else { '?' };
                url = format!("{url}{sep}{name}={}", http_client::query_encode(&v));
            }
        }
        let authorization = self.basic.as_ref().map(|b| format!("Basic {b}"));
        let response = self.call(url, authorization).await?;
        if response.status != 200 {
            return Err(format!("token endpoint: http {}", response.status));
        }
        let t: Token =
            serde_json::from_slice(&response.body).map_err(|e| format!("token endpoint: {e}"))?;
        t.token
            .or(t.access_token)
            .ok_or_else(|| "the token endpoint gave no token".to_owned())
    }
}

/// The compressed size of `image` (config and layers) from its registry, within [`TIMEOUT`].
pub(crate) async fn compressed_size(
    image: &str,
    auth: Option<&RegistryAuth>,
) -> Result<u64, String> {
    let (repo, reference) = split_reference(image);
    let host = registry_host(image);
    let mut name = repo
        .strip_prefix(&format!("{host}/"))
        .unwrap_or(repo)
        .to_owned();
    let server = if host == "docker.io" {
        if !name.contains('/') {
            name = format!("library/{name}");
        }
        "registry-1.docker.io"
    } else {
        host
    };
    let local = server.starts_with("127.") || server.starts_with("localhost");
    let scheme = if local { "http" } else { "https" };
    let mut fetcher = Fetcher {
        tls: Arc::new(http_client::tls_config(None)?),
        base: format!("{scheme}://{server}/v2/{name}/manifests/"),
        basic: auth.map(|a| {
            base64::engine::general_purpose::STANDARD
                .encode(format!("{}:{}", a.username, a.password))
        }),
        bearer: None,
        deadline: tokio::time::Instant::now() + TIMEOUT,
    };
    let mut manifest = fetcher.get(reference).await?;
    if manifest.layers.is_empty() && !manifest.manifests.is_empty() {
        let digest = manifest
            .manifests
            .iter()
            .find(|m| {
                m.platform
                    .as_ref()
                    .is_some_and(|p| p.os == "linux" && p.architecture == arch())
            })
            .map(|m| m.digest.clone())
            .ok_or_else(|| format!("no linux/{} image in the manifest list", arch()))?;
        manifest = fetcher.get(&digest).await?;
    }
    let config = manifest.config.map_or(0, |c| c.size);
    Ok(manifest
        .layers
        .iter()
        .fold(config, |sum, l| sum.saturating_add(l.size)))
}

/// Free bytes for unprivileged use on the file system holding `path`.
pub(crate) fn free_bytes(path: &Path) -> Result<u64, String> {
    let st = rustix::fs::statvfs(path).map_err(|e| format!("statvfs {}: {e}", path.display()))?;
    Ok(st.f_bavail.saturating_mul(st.f_frsize))
}

/// `Err` with the message for the app when `needed` plus `reserve_mb` do not fit in `free`.
pub(crate) fn check(
    image: &str,
    root: &str,
    free: u64,
    needed: u64,
    reserve_mb: u64,
) -> Result<(), String> {
    let mb = |b: u64| b / 1_000_000;
    let reserve = reserve_mb.saturating_mul(1_000_000);
    if free < needed.saturating_add(reserve) {
        return Err(format!(
            "not enough disk space to pull {image}: the engine's data root {root} has {} MB free, the image needs {} MB (compressed) plus the reserve of {reserve_mb} MB (apps.pull_disk_reserve_mb)",
            mb(free),
            mb(needed)
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A registry on 127.0.0.1 that wants a bearer token from its realm, given for basic
    /// credentials; answers three requests, then returns what it saw.
    async fn token_registry() -> (String, tokio::task::JoinHandle<Vec<String>>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let realm = format!("http://{addr}/token");
        let task = tokio::spawn(async move {
            let mut seen = Vec::new();
            for _ in 0..3 {
                let (mut s, _) = listener.accept().await.unwrap();
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    let n = s.read(&mut buf).await.unwrap();
                    if n == 0 {
                        break;
                    }
                    head.extend_from_slice(&buf[..n]);
                }
                let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
                let (status, extra, body) = if head.starts_with("get /token?") {
                    (200, String::new(), r#"{"token":"tok123"}"#.to_owned())
                } else if head.contains("authorization: bearer tok123") {
                    let m = r#"{"config":{"size":10},"layers":[{"size":20},{"size":30}]}"#;
                    (200, String::new(), m.to_owned())
                } else {
                    let challenge = format!(
                        "www-authenticate: Bearer realm=\"{realm}\",service=\"reg\",scope=\"repository:odac/x:pull\"\r\n"
                    );
                    (401, challenge, String::new())
                };
                let answer = format!(
                    "HTTP/1.1 {status} X\r\n{extra}content-length: {}\r\n\r\n{body}",
                    body.len()
                );
                s.write_all(answer.as_bytes()).await.unwrap();
                s.shutdown().await.unwrap();
                seen.push(head);
            }
            seen
        });
        (addr, task)
    }

    #[tokio::test]
    async fn bearer_challenge_is_answered_with_a_token_from_the_realm() {
        let (addr, seen) = token_registry().await;
        let auth = RegistryAuth {
            username: "odac".into(),
            password: "pw".into(),
            ..RegistryAuth::default()
        };
        let size = compressed_size(&format!("{addr}/odac/x:1"), Some(&auth))
            .await
            .unwrap();
        assert_eq!(size, 60);
        let seen = seen.await.unwrap();
        assert!(
            seen[0].starts_with("get /v2/odac/x/manifests/1 "),
            "{seen:?}"
        );
        assert!(
            seen[0].contains("authorization: basic b2rhyzpwdw=="),
            "{seen:?}"
        );
        assert!(
            seen[1].starts_with("get /token?service=reg&scope=repository%3aodac%2fx%3apull "),
            "{seen:?}"
        );
        assert!(seen[1].contains("authorization: basic"), "{seen:?}");
        assert!(seen[2].contains("authorization: bearer tok123"), "{seen:?}");
    }

    #[tokio::test]
    async fn errors_name_the_path_and_never_the_password() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let auth = RegistryAuth {
            username: "odac".into(),
            password: "s3cret-pw".into(),
            ..RegistryAuth::default()
        };
        let e = compressed_size(&format!("{addr}/odac/x:1"), Some(&auth))
            .await
            .unwrap_err();
        assert!(e.contains("/v2/odac/x/manifests/1"), "{e}");
        assert!(
            !e.contains("s3cret") && !e.contains("b2RhYzpzM2NyZXQtcHc="),
            "{e}"
        );
    }

    #[test]
    fn challenges_parse_and_space_is_checked() {
        let h = r#"Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/busybox:pull""#;
        assert_eq!(
            challenge_param(h, "realm").as_deref(),
            Some("https://auth.docker.io/token")
        );
        assert_eq!(
            challenge_param(h, "scope").as_deref(),
            Some("repository:library/busybox:pull")
        );
        assert!(check("x:1", "/var/lib/docker", 3_000_000_000, 1_000_000_000, 1024).is_ok());
        let e = check("x:1", "/var/lib/docker", 1_500_000_000, 1_000_000_000, 1024).unwrap_err();
        assert!(e.contains("not enough disk space to pull x:1"), "{e}");
        assert!(e.contains("1500 MB free") && e.contains("1000 MB"), "{e}");
        assert!(free_bytes(Path::new("/")).is_ok_and(|b| b > 0));
    }
}
