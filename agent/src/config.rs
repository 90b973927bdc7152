//! The agent's configuration: `/etc/odac/agent.toml` (or `--config FILE`) overlaid by
//! environment variables `ODAC_AGENT__<KEY>`, nested keys joined with `__` (for example
//! `ODAC_AGENT__CONTROL_PLANE__URL`). Every key, with its default, is documented in
//! `deploy/agent.toml`. Loading checks every value; an error names the key, and the binary
//! exits with code 78 on it so that systemd does not restart a misconfigured agent in a loop.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::appmgr::AppManagerConfig;
use crate::uplink::{BackoffPolicy, Endpoint, OutboxLimits, TlsSettings};

/// Default configuration file.
pub const DEFAULT_CONFIG_FILE: &str = "/etc/odac/agent.toml";
/// Prefix of the environment overlay (followed by `__` and the key).
pub const ENV_PREFIX: &str = "ODAC_AGENT";

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
    PathBuf::from("/var/lib/odac-agent")
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
    fn key(key: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError::Key {
            key: key.into(),
            message: message.into(),
        }
    }
}

impl Config {
    /// Loads `path` (or the default file, which may be absent) and the process environment.
    pub fn load(path: Option<&Path>) -> Result<Config, ConfigError> {
        let env: Vec<(String, String)> = std::env::vars().collect();
        Config::load_with_env(path, env)
    }

    /// Loads `path` (or the default file, which may be absent) overlaid by `env`.
    pub fn load_with_env(
        path: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Config, ConfigError> {
        use config::{Environment, File, FileFormat};
        let (file, required) = match path {
            Some(p) => (p.to_owned(), true),
            None => (PathBuf::from(DEFAULT_CONFIG_FILE), false),
        };
        if required && !file.is_file() {
            return Err(ConfigError::File {
                path: file,
                message: "no such file".into(),
            });
        }
        let env_map: config::Map<String, String> = env
            .into_iter()
            .filter(|(k, _)| k.starts_with(&format!("{ENV_PREFIX}__")))
            .collect();
        let raw = config::Config::builder()
            .add_source(
                File::from(file.as_path())
                    .format(FileFormat::Toml)
                    .required(required),
            )
            .add_source(
                Environment::with_prefix(ENV_PREFIX)
                    .prefix_separator("__")
                    .separator("__")
                    .source(Some(env_map)),
            )
            .build()
            .map_err(|e| ConfigError::File {
                path: file.clone(),
                message: e.to_string(),
            })?;
        crate::config_check::no_fractions("", &raw.cache)?;
        let apps_state_dir_set = raw.get::<String>("apps.state_dir").is_ok();
        let mut config: Config = serde_path_to_error::deserialize(raw).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner().to_string();
            named(&path, &inner)
        })?;
        if !apps_state_dir_set {
            config.apps.state_dir = config.state_dir.clone();
        }
        config.control_plane.normalise();
        config.validate()?;
        Ok(config)
    }

    /// Checks every value that has a range or a format.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let cp = &self.control_plane;
        Endpoint::parse(&cp.url).map_err(|e| ConfigError::key("control_plane.url", e.message()))?;
        range("control_plane.heartbeat_secs", cp.heartbeat_secs, 1, 3600)?;
        range(
            "control_plane.connect_timeout_secs",
            cp.connect_timeout_secs,
            1,
            300,
        )?;
        range(
            "control_plane.backoff_base_ms",
            cp.backoff_base_ms,
            1,
            600_000,
        )?;
        range(
            "control_plane.backoff_max_secs",
            cp.backoff_max_secs,
            1,
            86_400,
        )?;
        if cp.backoff_max_secs.saturating_mul(1000) < cp.backoff_base_ms {
            return Err(ConfigError::key(
                "control_plane.backoff_max_secs",
                "must not be smaller than control_plane.backoff_base_ms",
            ));
        }
        range(
            "control_plane.healthy_after_secs",
            cp.healthy_after_secs,
            1,
            86_400,
        )?;
        range(
            "control_plane.auth_retry_secs",
            cp.auth_retry_secs,
            2,
            86_400,
        )?;
        range(
            "control_plane.max_pending_statuses",
            cp.max_pending_statuses as u64,
            1,
            1_000_000,
        )?;
        range(
            "control_plane.max_pending_events",
            cp.max_pending_events as u64,
            1,
            1_000_000,
        )?;
        match (&cp.client_cert, &cp.client_key) {
            (Some(_), None) => {
                return Err(ConfigError::key(
                    "control_plane.client_key",
                    "is required when control_plane.client_cert is set",
                ));
            }
            (None, Some(_)) => {
                return Err(ConfigError::key(
                    "control_plane.client_cert",
                    "is required when control_plane.client_key is set",
                ));
            }
            _ => {}
        }
        if !self.state_dir.is_absolute() {
            return Err(ConfigError::key(
                "state_dir",
                format!("{} is not an absolute path", self.state_dir.display()),
            ));
        }
        if !self.host_root.is_absolute() {
            return Err(ConfigError::key(
                "host_root",
                format!("{} is not an absolute path", self.host_root.display()),
            ));
        }
        range(
            "inventory.interval_secs",
            self.inventory.interval_secs,
            1,
            10,
        )?;
        let (min, max) = crate::telemetry::config::INTERVAL_RANGE;
        range(
            "telemetry.interval_secs",
            self.telemetry.interval_secs,
            min,
            max,
        )?;
        crate::config_check::log_filter(&self.log_level)?;
        crate::config_check::apps(&self.apps)?;
        if let Some(h) = &self.docker.host
            && h.trim().is_empty()
        {
            return Err(ConfigError::key("docker.host", "is empty"));
        }
        Ok(())
    }

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

fn range(key: &str, value: u64, min: u64, max: u64) -> Result<(), ConfigError> {
    if value < min || value > max {
        return Err(ConfigError::key(
            key,
            format!("{value} is out of range {min}..={max}"),
        ));
    }
    Ok(())
}

/// Turns a deserialisation error at `path` into one naming the full key.
fn named(path: &str, message: &str) -> ConfigError {
    let path = if path == "." { "" } else { path };
    let missing = message
        .strip_prefix("missing field `")
        .and_then(|r| r.split('`').next())
        .or_else(|| {
            message
                .strip_prefix("missing configuration field \"")
                .and_then(|r| r.split('"').next())
        });
    if let Some(field) = missing {
        // config names nested fields with their full dotted key already
        if field.contains('.') {
            return ConfigError::key(field, "is required");
        }
        let key = if path.is_empty() {
            field.to_owned()
        } else {
            format!("{path}.{field}")
        };
        return ConfigError::key(key, "is required");
    }
    // config appends " for key `...`" (and the source); the key is named in front already
    let message = message.split(" for key `").next().unwrap_or(message);
    if let Some(rest) = message.strip_prefix("unknown field `") {
        let field = rest.split('`').next().unwrap_or(rest);
        let key = if path.is_empty() {
            field.to_owned()
        } else if path == field || path.ends_with(&format!(".{field}")) {
            path.to_owned()
        } else {
            format!("{path}.{field}")
        };
        let expected = rest
            .split_once(", expected ")
            .map(|(_, e)| format!(" (expected {e})"))
            .unwrap_or_default();
        return ConfigError::key(key, format!("is not a known key{expected}"));
    }
    let key = if path.is_empty() { "(top level)" } else { path };
    ConfigError::key(key, message.to_owned())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn load(toml: &str, env: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent.toml");
        std::fs::write(&path, toml).unwrap();
        let env = env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned()));
        Config::load_with_env(Some(&path), env)
    }

    fn key_of(e: ConfigError) -> String {
        match e {
            ConfigError::Key { key, .. } => key,
            other => format!("file: {other}"),
        }
    }

    #[test]
    fn minimal_file_gets_the_documented_defaults() {
        let c = load(
            "[control_plane]\nurl = \"wss://cp.example/agent/v1\"\n",
            &[],
        )
        .unwrap();
        assert_eq!(c.control_plane.token_file, Some("/etc/odac/token".into()));
        assert_eq!(c.control_plane.heartbeat_secs, 20);
        assert_eq!(c.state_dir, PathBuf::from("/var/lib/odac-agent"));
        assert_eq!(c.apps.state_dir, c.state_dir);
        assert_eq!(c.log_format, LogFormat::Text);
        assert_eq!(c.inventory.interval_secs, 10);
        assert_eq!(c.telemetry.interval_secs, 60);
        assert_eq!(c.backoff(), BackoffPolicy::default());
        assert_eq!(c.outbox(), OutboxLimits::default());
    }

    #[test]
    fn the_example_file_loads_as_is() {
        let text = include_str!("../../deploy/agent.toml");
        let c = load(text, &[]).unwrap();
        assert_eq!(c.control_plane.url, "wss://app.odac.run/agent/v1");
        assert_eq!(c.backoff(), BackoffPolicy::default());
        assert_eq!(
            c.apps,
            AppManagerConfig {
                state_dir: c.state_dir.clone(),
                ..AppManagerConfig::default()
            }
        );
    }

    #[test]
    fn environment_overlays_the_file_with_nested_keys() {
        let c = load(
            "state_dir = \"/srv/odac\"\n[control_plane]\nurl = \"wss://a/agent/v1\"\n",
            &[
                ("ODAC_AGENT__CONTROL_PLANE__URL", "wss://b:7443/agent/v1"),
                ("ODAC_AGENT__CONTROL_PLANE__HEARTBEAT_SECS", "5"),
                ("ODAC_AGENT__LOG_FORMAT", "json"),
                ("ODAC_AGENT__DOCKER__HOST", "unix:///run/docker.sock"),
                ("ODAC_AGENT__CONTROL_PLANE__CA_FILE", ""),
                ("ODAC_AGENT_TOKEN", "not-a-config-key"),
            ],
        )
        .unwrap();
        assert_eq!(c.control_plane.url, "wss://b:7443/agent/v1");
        assert_eq!(c.control_plane.heartbeat_secs, 5);
        assert_eq!(c.log_format, LogFormat::Json);
        assert_eq!(c.docker.host.as_deref(), Some("unix:///run/docker.sock"));
        assert_eq!(c.control_plane.ca_file, None);
        assert_eq!(c.apps.state_dir, PathBuf::from("/srv/odac"));
    }

    #[test]
    fn errors_name_the_key() {
        let ok = "[control_plane]\nurl = \"wss://a/agent/v1\"\n";
        assert_eq!(key_of(load("", &[]).unwrap_err()), "control_plane");
        assert_eq!(
            key_of(load("[control_plane]\n", &[]).unwrap_err()),
            "control_plane.url"
        );
        let e = load("[control_plane]\nurl = \"ws://a/\"\n", &[]).unwrap_err();
        assert_eq!(key_of(e.clone()), "control_plane.url");
        assert!(e.to_string().contains("only wss://"), "{e}");
        let cases: &[(&str, &str, &str)] = &[
            (
                "ODAC_AGENT__CONTROL_PLANE__HEARTBEAT_SECS",
                "0",
                "control_plane.heartbeat_secs",
            ),
            (
                "ODAC_AGENT__CONTROL_PLANE__HEARTBEAT_SECS",
                "soon",
                "control_plane.heartbeat_secs",
            ),
            ("ODAC_AGENT__LOG_FORMAT", "xml", "log_format"),
            ("ODAC_AGENT__LOG_LEVEL", "info,=[", "log_level"),
            (
                "ODAC_AGENT__INVENTORY__INTERVAL_SECS",
                "60",
                "inventory.interval_secs",
            ),
            ("ODAC_AGENT__STATE_DIR", "relative/dir", "state_dir"),
            (
                "ODAC_AGENT__CONTROL_PLANE__CLIENT_CERT",
                "/x.pem",
                "control_plane.client_key",
            ),
            ("ODAC_AGENT__CONTROL_PLANE__TYPO", "1", "control_plane.typo"),
            (
                "ODAC_AGENT__APPS__POLL_INTERVAL_MS",
                "fast",
                "apps.poll_interval_ms",
            ),
            ("ODAC_AGENT__LOG_LEVEL", "infoo", "log_level"),
            (
                "ODAC_AGENT__TELEMETRY__INTERVAL_SECS",
                "5",
                "telemetry.interval_secs",
            ),
            (
                "ODAC_AGENT__APPS__POLL_INTERVAL_MS",
                "0",
                "apps.poll_interval_ms",
            ),
            (
                "ODAC_AGENT__APPS__BUILD__KEEP_IMAGES",
                "0",
                "apps.build.keep_images",
            ),
            ("ODAC_AGENT__APPS__INSTANCE", "Bad Name!", "apps.instance"),
            ("ODAC_AGENT__APPS__PIDS_LIMIT", "3", "apps.pids_limit"),
            (
                "ODAC_AGENT__APPS__LOG_MAX_SIZE_BYTES",
                "1024",
                "apps.log_max_size_bytes",
            ),
            ("ODAC_AGENT__APPS__LOG_MAX_FILES", "0", "apps.log_max_files"),
            (
                "ODAC_AGENT__APPS__CRASH_LOOP__MAX_BACKOFF_SECS",
                "0",
                "apps.crash_loop.max_backoff_secs",
            ),
        ];
        for (k, v, want) in cases {
            let e = load(ok, &[(k, v)]).unwrap_err();
            let text = e.to_string();
            assert_eq!(key_of(e), *want, "{k}={v}: {text}");
            assert!(text.contains(want), "{text}");
        }
    }

    #[test]
    fn fractions_and_relative_paths_in_the_file_are_refused() {
        let ok = "[control_plane]\nurl = \"wss://a/agent/v1\"\n";
        let cases: &[(&str, &str)] = &[
            ("heartbeat_secs = 1.5\n", "control_plane.heartbeat_secs"),
            ("[apps]\npoll_interval_ms = 0\n", "apps.poll_interval_ms"),
            ("[apps.build]\nkeep_images = 0\n", "apps.build.keep_images"),
            (
                "[apps.policy]\nallowed_bind_prefixes = [\"/srv\", \"data\"]\n",
                "apps.policy.allowed_bind_prefixes[1]",
            ),
            ("[apps]\ninstance = \"Bad Name!\"\n", "apps.instance"),
            ("[apps]\nstate_dir = \"rel\"\n", "apps.state_dir"),
        ];
        for (extra, want) in cases {
            let e = load(&format!("{ok}{extra}"), &[]).unwrap_err();
            let text = e.to_string();
            assert_eq!(key_of(e), *want, "{extra}: {text}");
        }
    }

    #[test]
    fn explicit_missing_file_is_an_error_but_the_default_may_be_absent() {
        let e =
            Config::load_with_env(Some(Path::new("/nonexistent/agent.toml")), vec![]).unwrap_err();
        assert!(matches!(e, ConfigError::File { .. }));
        let c = Config::load_with_env(
            None,
            vec![(
                "ODAC_AGENT__CONTROL_PLANE__URL".to_owned(),
                "wss://x/agent/v1".to_owned(),
            )],
        );
        // the default file may exist on a dev machine; without it, env alone is enough
        if !Path::new(DEFAULT_CONFIG_FILE).exists() {
            assert_eq!(c.unwrap().control_plane.url, "wss://x/agent/v1");
        }
    }
}
