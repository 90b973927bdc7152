//! [`DockerEngine`]: the bollard implementation of the engine seam. The connection is made
//! lazily and re-made after an outage, so an agent started before Docker (or across a Docker
//! restart) converges once the engine answers again; every call is bounded by a timeout.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use bollard::{API_DEFAULT_VERSION, Docker};

use super::capabilities::EngineCapabilities;
use super::convert::map_error;
use super::error::EngineError;

/// How long connecting (version negotiation) and `GET /info` may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Request timeout of ordinary engine calls, in seconds (bollard's unit).
const REQUEST_TIMEOUT_S: u64 = 120;

/// A list filter for objects that carry label `key` or `key=value`.
pub(super) fn label_filter(label: &str) -> HashMap<String, Vec<String>> {
    HashMap::from([("label".to_owned(), vec![label.to_owned()])])
}

/// Labels as a bollard request takes them.
pub(super) fn label_map(labels: &BTreeMap<String, String>) -> HashMap<String, String> {
    labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// Where the engine listens.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Endpoint {
    /// bollard's local default: `DOCKER_HOST` when it is `unix://`, else `/var/run/docker.sock`.
    LocalDefault,
    /// A unix socket path.
    Unix(String),
    /// `tcp://host:port` or `http://host:port`.
    Http(String),
}

impl Endpoint {
    fn parse(docker_host: Option<&str>) -> Result<Self, EngineError> {
        let Some(host) = docker_host.map(str::trim).filter(|h| !h.is_empty()) else {
            return Ok(Self::LocalDefault);
        };
        if let Some(path) = host.strip_prefix("unix://") {
            Ok(Self::Unix(path.to_owned()))
        } else if host.starts_with('/') {
            Ok(Self::Unix(host.to_owned()))
        } else if host.starts_with("tcp://") || host.starts_with("http://") {
            Ok(Self::Http(host.to_owned()))
        } else {
            Err(EngineError::Other(format!(
                "unsupported docker host {host:?}: expected unix://PATH, /PATH, tcp://HOST:PORT or http://HOST:PORT"
            )))
        }
    }

    fn describe(&self) -> String {
        match self {
            Self::LocalDefault => "the local docker socket".into(),
            Self::Unix(path) => format!("unix://{path}"),
            Self::Http(host) => host.clone(),
        }
    }

    /// Build a client; this does not talk to the engine (except that a missing unix socket
    /// is reported here).
    fn client(&self) -> Result<Docker, EngineError> {
        let client = match self {
            Self::LocalDefault => Docker::connect_with_local_defaults(),
            Self::Unix(path) => {
                Docker::connect_with_unix(path, REQUEST_TIMEOUT_S, API_DEFAULT_VERSION)
            }
            Self::Http(host) => {
                Docker::connect_with_http(host, REQUEST_TIMEOUT_S, API_DEFAULT_VERSION)
            }
        };
        client.map_err(map_error)
    }
}

/// The Docker engine, reached through bollard.
pub struct DockerEngine {
    endpoint: Endpoint,
    /// The negotiated client; `None` until the engine first answers and after an outage.
    client: Mutex<Option<Docker>>,
}

impl std::fmt::Debug for DockerEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DockerEngine")
            .field("endpoint", &self.endpoint.describe())
            .field("connected", &self.cached().is_some())
            .finish()
    }
}

impl DockerEngine {
    /// Connect to the engine at `docker_host` (`None`: the local default socket;
    /// `unix://PATH`, `/PATH`, `tcp://HOST:PORT`). An engine that is down is tolerated: the
    /// engine is returned anyway and later calls reconnect or return
    /// [`EngineError::Unavailable`]. Only an unusable `docker_host` is an error.
    pub async fn connect(docker_host: Option<&str>) -> Result<Self, EngineError> {
        let engine = Self::lazy(docker_host)?;
        if let Err(e) = engine.docker().await {
            tracing::warn!(endpoint = %engine.endpoint.describe(), error = %e, "docker engine not reachable yet; will retry on use");
        }
        Ok(engine)
    }

    /// Like [`DockerEngine::connect`] without the first connection attempt: the engine is
    /// first asked on the first call.
    pub fn lazy(docker_host: Option<&str>) -> Result<Self, EngineError> {
        Ok(Self {
            endpoint: Endpoint::parse(docker_host)?,
            client: Mutex::new(None),
        })
    }

    fn cached(&self) -> Option<Docker> {
        self.client.lock().map(|c| c.clone()).unwrap_or_default()
    }

    fn store(&self, client: Option<Docker>) {
        if let Ok(mut slot) = self.client.lock() {
            *slot = client;
        }
    }

    /// The negotiated client, connecting (and negotiating the API version) when needed.
    pub(crate) async fn docker(&self) -> Result<Docker, EngineError> {
        if let Some(client) = self.cached() {
            return Ok(client);
        }
        let client = self.endpoint.client()?;
        let negotiated = tokio::time::timeout(CONNECT_TIMEOUT, client.negotiate_version())
            .await
            .map_err(|_| {
                EngineError::Unavailable(format!(
                    "no answer from {} within {} s",
                    self.endpoint.describe(),
                    CONNECT_TIMEOUT.as_secs()
                ))
            })?
            .map_err(map_error)?;
        self.store(Some(negotiated.clone()));
        Ok(negotiated)
    }

    /// Pass a call's result through, forgetting the client when the engine went away so the
    /// next call reconnects and renegotiates.
    pub(crate) fn observe<T>(&self, result: Result<T, EngineError>) -> Result<T, EngineError> {
        if matches!(result, Err(EngineError::Unavailable(_))) {
            self.store(None);
        }
        result
    }

    /// Read the engine's capabilities (`GET /info`); never fails, an unreachable engine
    /// yields [`EngineCapabilities::unreachable`].
    pub async fn probe(&self) -> EngineCapabilities {
        match self.info_capabilities().await {
            Ok(caps) => caps,
            Err(e) => EngineCapabilities::unreachable(e.to_string()),
        }
    }

    async fn info_capabilities(&self) -> Result<EngineCapabilities, EngineError> {
        let docker = self.docker().await?;
        let info = tokio::time::timeout(CONNECT_TIMEOUT, docker.info())
            .await
            .map_err(|_| {
                EngineError::Unavailable(format!(
                    "no answer to GET /info from {} within {} s",
                    self.endpoint.describe(),
                    CONNECT_TIMEOUT.as_secs()
                ))
            })
            .and_then(|r| r.map_err(map_error));
        let info = self.observe(info)?;
        let json = serde_json::to_value(&info)
            .map_err(|e| EngineError::Other(format!("cannot re-encode GET /info answer: {e}")))?;
        Ok(EngineCapabilities::from_info_json(
            &json,
            Some(docker.client_version().to_string()),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_parse() {
        assert_eq!(Endpoint::parse(None), Ok(Endpoint::LocalDefault));
        assert_eq!(Endpoint::parse(Some("")), Ok(Endpoint::LocalDefault));
        assert_eq!(
            Endpoint::parse(Some("unix:///run/docker.sock")),
            Ok(Endpoint::Unix("/run/docker.sock".into()))
        );
        assert_eq!(
            Endpoint::parse(Some("/run/docker.sock")),
            Ok(Endpoint::Unix("/run/docker.sock".into()))
        );
        assert_eq!(
            Endpoint::parse(Some("tcp://127.0.0.1:2375")),
            Ok(Endpoint::Http("tcp://127.0.0.1:2375".into()))
        );
        assert!(Endpoint::parse(Some("ftp://x")).is_err());
    }

    #[tokio::test]
    async fn missing_socket_is_unavailable_not_an_error_at_connect() {
        let engine = DockerEngine::connect(Some("unix:///nonexistent/odac/docker.sock"))
            .await
            .unwrap_or_else(|e| panic!("connect must tolerate a down engine: {e}"));
        assert!(matches!(
            engine.docker().await,
            Err(EngineError::Unavailable(_))
        ));
        let caps = engine.probe().await;
        assert!(!caps.reachable);
        assert!(
            caps.error
                .is_some_and(|e| e.contains("/nonexistent/odac/docker.sock"))
        );
    }
}
