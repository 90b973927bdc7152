//! The range and format checks of a loaded configuration: every number with a range, paths
//! that must be absolute, certificate pairs, the log filter and the `[apps]` section (through
//! [`check`](super::check)).

use super::{Config, ConfigError};
use crate::uplink::Endpoint;

impl Config {
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
        self.metrics
            .listen()
            .map_err(|e| ConfigError::key(crate::metrics::config::LISTEN_KEY, e.message))?;
        let (min, max) = crate::update::COMMIT_WITHIN_RANGE;
        range(
            "update.commit_within_secs",
            self.update.commit_within_secs,
            min,
            max,
        )?;
        self.update
            .trusted_keys()
            .map_err(|e| ConfigError::key(format!("update.public_keys[{}]", e.index), e.why))?;
        let (min, max) = crate::gpu_health::config::RECOVERY_RANGE;
        range(
            "gpu.health_recovery_secs",
            self.gpu.health_recovery_secs,
            min,
            max,
        )?;
        for ((key, min, max), value) in crate::uplink::exec::config::RANGES
            .into_iter()
            .zip(self.exec.ranged())
        {
            range(key, value, min, max)?;
        }
        super::check::log_filter(&self.log_level)?;
        super::check::apps(&self.apps)?;
        if let Some(h) = &self.docker.host
            && h.trim().is_empty()
        {
            return Err(ConfigError::key("docker.host", "is empty"));
        }
        Ok(())
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
