//! The disk check before a pull: the image's compressed size, read from its manifest through
//! the registry's HTTP API (`GET /v2/<name>/manifests/<tag>`, basic or bearer-token auth, a
//! manifest list resolved to this host's platform), against the free space of the engine's
//! data root plus a reserve (`apps.pull_disk_reserve_mb`). Too little space fails the pull
//! with a message saying so, before a byte is downloaded. When the size or the free space
//! cannot be read, the pull goes ahead (the engine then reports what it meets). The requests
//! go through the agent's one HTTP client, [`odac_host::http_client`].
//!
//! The manifest is also the bound on what a registry may make the engine read: a manifest (or
//! token answer) over [`MAX_MANIFEST`] is [`Precheck::Refused`], and the pull fails before the
//! engine is asked for it (an endless manifest once grew dockerd by gigabytes). Plain HTTP is
//! used only for a literal loopback registry (`127.0.0.0/8`, `::1`, `localhost`); any other
//! host, `localhost.example.com` and `127.foo` included, is asked over HTTPS.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use serde::Deserialize;

use odac_host::engine::{RegistryAuth, registry_host, split_reference};
use odac_host::http_client;

/// Longest the manifest requests may take together.
const TIMEOUT: Duration = Duration::from_secs(20);
/// Largest manifest (or token answer) read; a larger one refuses the pull.
pub(crate) const MAX_MANIFEST: usize = 4 * 1024 * 1024;

/// Why the compressed size is not known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Precheck {
    /// The registry answered with something the engine must not be asked to pull: the pull
    /// fails with these words.
    Refused(String),
    /// The size could not be read (unreachable, no such manifest, refused credentials): the
    /// pull goes ahead and the engine reports what it meets.
    Unknown(String),
}

impl std::fmt::Display for Precheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Precheck::Refused(why) | Precheck::Unknown(why) => f.write_str(why),
        }
    }
}

impl From<String> for Precheck {
    fn from(why: String) -> Self {
        Precheck::Unknown(why)
    }
}

impl From<&str> for Precheck {
    fn from(why: &str) -> Self {
        Precheck::Unknown(why.to_owned())
    }
}

pub(crate) use odac_host::http_client::is_loopback;

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
    ) -> Result<http_client::Response, Precheck> {
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
            .map_err(|e| match e {
                http_client::HttpError::TooLarge { target, limit, .. } => Precheck::Refused(
                    format!(
                        "the registry's answer to {target} is larger than {limit} bytes: refused before the engine pulls it"
                    ),
                ),
                other => Precheck::Unknown(other.to_string()),
            })
    }

    async fn get(&mut self, path: &str) -> Result<Manifest, Precheck> {
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
                return Err(format!("{path}: http 401").into());
            }
            if response.status != 200 {
                return Err(format!("{path}: http {}", response.status).into());
            }
            return serde_json::from_slice(&response.body)
                .map_err(|e| format!("{path}: {e}").into());
        }
        Err(format!("{path}: refused after authenticating").into())
    }

    async fn token(&self, challenge: &str) -> Result<String, Precheck> {
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
        let plain = realm.strip_prefix("http://").map(|rest| {
            let end = rest.find(['/', '?']).unwrap_or(rest.len());
            &rest[..end]
        });
        if plain.is_some_and(|authority| !is_loopback(authority)) && self.basic.is_some() {
            return Err("the token realm is plain http on a host that is not loopback: credentials are not sent there".into());
        }
        let authorization = self.basic.as_ref().map(|b| format!("Basic {b}"));
        let response = self.call(url, authorization).await?;
        if response.status != 200 {
            return Err(format!("token endpoint: http {}", response.status).into());
        }
        let t: Token =
            serde_json::from_slice(&response.body).map_err(|e| format!("token endpoint: {e}"))?;
        t.token
            .or(t.access_token)
            .ok_or_else(|| "the token endpoint gave no token".into())
    }
}

/// The compressed size of `image` (config and layers) from its registry, within [`TIMEOUT`].
pub(crate) async fn compressed_size(
    image: &str,
    auth: Option<&RegistryAuth>,
) -> Result<u64, Precheck> {
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
    let scheme = if is_loopback(server) { "http" } else { "https" };
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
mod tests;
