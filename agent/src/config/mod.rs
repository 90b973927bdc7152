//! The agent's configuration: `/etc/odac/agent.toml` (or `--config FILE`) overlaid by
//! environment variables `ODAC_AGENT__<KEY>`, nested keys joined with `__` (for example
//! `ODAC_AGENT__CONTROL_PLANE__URL`). Every key, with its default, is documented in
//! `deploy/agent.toml`. Loading checks every value; an error names the key, and the binary
//! exits with code 78 on it so that systemd does not restart a misconfigured agent in a loop.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

mod check;
mod load;
mod validate;

use crate::appmgr::AppManagerConfig;
use crate::uplink::{BackoffPolicy, OutboxLimits, TlsSettings};

/// Default configuration file.
pub const DEFAULT_CONFIG_FILE: &str = "/etc/odac/agent.toml";
/// Prefix of the environment overlay (followed by `__` and the key).
pub const ENV_PREFIX: &str = "ODAC_AGENT";
/// The default state directory (agent id, desired state, statuses), for the agent and for
/// every local command (defined beside the app manager's settings, which use it).
pub use crate::appmgr::DEFAULT_STATE_DIR;

/// The whole configuration.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// How to reach the control plane.
    pub control_plane: ControlPlaneConfig,
    /// Directory of the agent id and the app manager's state.
    #[serde(default = "default_state_dir")]
    pub state_dir: PathBuf,
    /// Root under which host facts (`/sys`, `/proc`, `/dev`, CDI dirs) are read.
    #[serde(default = "default_host_root")]
    pub host_root: PathBuf,
    /// Docker engine.
    #[serde(default)]
    pub docker: DockerConfig,
    /// Log filter: a level (`info`) or a tracing filter (`info,odac_agent::uplink=debug`).
    #[serde(default = "default_log_level")]
    pub log_level: String,
    /// Log line format.
    #[serde(default)]
    pub log_format: LogFormat,
    /// Inventory rescans.
    #[serde(default)]
    pub inventory: InventoryConfig,
    /// The app manager (`[apps]`); its `state_dir` defaults to the top-level `state_dir`.
    #[serde(default)]
    pub apps: AppManagerConfig,
    /// GPU telemetry (`[telemetry]`).
    #[serde(default)]
    pub telemetry: crate::telemetry::TelemetryConfig,
    /// The Prometheus endpoint (`[metrics]`).
    #[serde(default)]
    pub metrics: crate::metrics::MetricsConfig,
    /// GPU health (`[gpu]`).
    #[serde(default)]
    pub gpu: crate::gpu_health::GpuHealthConfig,
    /// Self-update (`[update]`).
    #[serde(default)]
    pub update: crate::update::UpdateConfig,
    /// Exec sessions (`[exec]`).
    #[serde(default)]
    pub exec: crate::uplink::exec::ExecConfig,
}

/// `[control_plane]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ControlPlaneConfig {
    /// `wss://` URL of the control plane's agent endpoint. Required.
    pub url: String,
    /// File holding the bearer token (mode 0600). `ODAC_AGENT_TOKEN` wins when set.
    #[serde(default = "default_token_file")]
    pub token_file: Option<PathBuf>,
    /// PEM CA certificate(s) to trust instead of the public web roots.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// PEM client certificate chain for mutual TLS.
    #[serde(default)]
    pub client_cert: Option<PathBuf>,
    /// PEM private key of `client_cert`.
    #[serde(default)]
    pub client_key: Option<PathBuf>,
    /// WebSocket ping interval, seconds.
    #[serde(default = "default_heartbeat_secs")]
    pub heartbeat_secs: u64,
    /// Bound of each connection phase (tcp, tls, upgrade, welcome), seconds.
    #[serde(default = "default_connect_timeout_secs")]
    pub connect_timeout_secs: u64,
    /// Ceiling of the first reconnect delay, milliseconds.
    #[serde(default = "default_backoff_base_ms")]
    pub backoff_base_ms: u64,
    /// Largest reconnect delay ceiling, seconds.
    #[serde(default = "default_backoff_max_secs")]
    pub backoff_max_secs: u64,
    /// A session up this long resets the reconnect backoff, seconds.
    #[serde(default = "default_healthy_after_secs")]
    pub healthy_after_secs: u64,
    /// Delay after the control plane refused the token, seconds (drawn from [x/2, x]).
    #[serde(default = "default_auth_retry_secs")]
    pub auth_retry_secs: u64,
    /// Most apps with an unacked status kept for resend.
    #[serde(default = "default_max_pending_statuses")]
    pub max_pending_statuses: usize,
    /// Most unacked diagnostic events kept; older ones are dropped and counted.
    #[serde(default = "default_max_pending_events")]
    pub max_pending_events: usize,
}

/// `[docker]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DockerConfig {
    /// Engine endpoint (`unix:///var/run/docker.sock`, `tcp://...`); unset: `DOCKER_HOST` or
    /// the local socket.
    #[serde(default)]
    pub host: Option<String>,
}

/// `[inventory]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InventoryConfig {
    /// Rescan interval, seconds (1..=10).
    #[serde(default = "default_inventory_interval_secs")]
    pub interval_secs: u64,
}

impl Default for InventoryConfig {
    fn default() -> Self {
        Self {
            interval_secs: default_inventory_interval_secs(),
        }
    }
}

/// Log line format.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines (colours on a terminal, plain for journald).
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

fn default_state_dir() -> PathBuf {
    PathBuf::from(DEFAULT_STATE_DIR)
}
fn default_host_root() -> PathBuf {
    PathBuf::from("/")
}
fn default_log_level() -> String {
    "info".into()
}
fn default_token_file() -> Option<PathBuf> {
    Some(PathBuf::from("/etc/odac/token"))
}
fn default_heartbeat_secs() -> u64 {
    20
}
fn default_connect_timeout_secs() -> u64 {
    10
}
fn default_backoff_base_ms() -> u64 {
    1_000
}
fn default_backoff_max_secs() -> u64 {
    60
}
fn default_healthy_after_secs() -> u64 {
    60
}
fn default_auth_retry_secs() -> u64 {
    300
}
fn default_max_pending_statuses() -> usize {
    1024
}
fn default_max_pending_events() -> usize {
    256
}
fn default_inventory_interval_secs() -> u64 {
    10
}

/// A configuration that cannot be used. Exit code 78.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read or parsed.
    #[error("configuration file {path}: {message}", path = path.display())]
    File { path: PathBuf, message: String },
    /// A key has a bad value (or is missing, or unknown).
    #[error("invalid configuration: {key}: {message}")]
    Key { key: String, message: String },
}

impl ConfigError {
    pub(crate) fn key(key: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError::Key {
            key: key.into(),
            message: message.into(),
        }
    }
}

impl Config {
    /// The uplink's trust settings.
    pub fn tls_settings(&self) -> TlsSettings {
        TlsSettings {
            ca_file: self.control_plane.ca_file.clone(),
            client_cert: self.control_plane.client_cert.clone(),
            client_key: self.control_plane.client_key.clone(),
        }
    }

    /// The reconnect policy.
    pub fn backoff(&self) -> BackoffPolicy {
        let cp = &self.control_plane;
        BackoffPolicy {
            base: Duration::from_millis(cp.backoff_base_ms),
            cap: Duration::from_secs(cp.backoff_max_secs),
            healthy_after: Duration::from_secs(cp.healthy_after_secs),
            auth_retry: Duration::from_secs(cp.auth_retry_secs),
        }
    }

    /// The outbox bounds.
    pub fn outbox(&self) -> OutboxLimits {
        OutboxLimits {
            max_statuses: self.control_plane.max_pending_statuses,
            max_events: self.control_plane.max_pending_events,
        }
    }
}

impl ControlPlaneConfig {
    /// Empty path strings (e.g. `ODAC_AGENT__CONTROL_PLANE__CA_FILE=`) mean "unset".
    fn normalise(&mut self) {
        for p in [
            &mut self.token_file,
            &mut self.ca_file,
            &mut self.client_cert,
            &mut self.client_key,
        ] {
            if p.as_ref().is_some_and(|p| p.as_os_str().is_empty()) {
                *p = None;
            }
        }
    }
}

#[cfg(test)]
mod tests;
