//! `[metrics]` of agent.toml: where the Prometheus endpoint listens (`listen`), off when
//! unset. A value is a TCP socket address (`127.0.0.1:9400`, `[::1]:9400`) or an absolute
//! unix socket path (`/run/odac/metrics.sock`); anything else is a configuration error naming
//! `metrics.listen`, checked with the rest of the configuration.

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::Deserialize;

/// The key errors name.
pub const LISTEN_KEY: &str = "metrics.listen";

/// `[metrics]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsConfig {
    /// Address or unix socket path of the `/metrics` endpoint; unset: no endpoint.
    #[serde(default)]
    pub listen: Option<String>,
}

/// Where the endpoint listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    /// A TCP socket address.
    Tcp(SocketAddr),
    /// A unix socket at this absolute path.
    Unix(PathBuf),
}

/// Why `metrics.listen` cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {message}", key = LISTEN_KEY)]
pub struct ListenError {
    /// What is wrong with the value.
    pub message: String,
}

impl MetricsConfig {
    /// The parsed `listen`, `None` when the endpoint is off.
    pub fn listen(&self) -> Result<Option<Listen>, ListenError> {
        self.listen.as_deref().map(Listen::parse).transpose()
    }
}

impl Listen {
    /// Parses a socket address or an absolute unix socket path.
    pub fn parse(value: &str) -> Result<Listen, ListenError> {
        let trimmed = value.trim();
        if trimmed.is_empty() {
            return Err(ListenError {
                message: "is empty (leave it out to turn the endpoint off)".into(),
            });
        }
        if trimmed.starts_with('/') {
            return Ok(Listen::Unix(PathBuf::from(trimmed)));
        }
        trimmed.parse::<SocketAddr>().map(Listen::Tcp).map_err(|_| ListenError {
            message: format!(
                "{value:?} is neither an ip:port socket address (127.0.0.1:9400) nor an absolute unix socket path"
            ),
        })
    }
}

impl std::fmt::Display for Listen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Listen::Tcp(addr) => write!(f, "{addr}"),
            Listen::Unix(path) => write!(f, "unix:{}", path.display()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_and_socket_paths_parse_and_anything_else_names_the_key() {
        assert_eq!(
            Listen::parse("127.0.0.1:9400").unwrap(),
            Listen::Tcp("127.0.0.1:9400".parse().unwrap())
        );
        assert_eq!(
            Listen::parse("[::1]:9400").unwrap(),
            Listen::Tcp("[::1]:9400".parse().unwrap())
        );
        assert_eq!(
            Listen::parse("/run/odac/metrics.sock").unwrap(),
            Listen::Unix("/run/odac/metrics.sock".into())
        );
        for bad in ["localhost:9400", "9400", "127.0.0.1", "metrics.sock", " "] {
            let err = Listen::parse(bad).unwrap_err().to_string();
            assert!(err.starts_with("metrics.listen: "), "{bad}: {err}");
        }
        assert_eq!(MetricsConfig::default().listen().unwrap(), None);
    }
}
