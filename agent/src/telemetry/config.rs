//! `[telemetry]` of agent.toml: how often GPUs are sampled (`interval_secs`, 10..=600, 60 by
//! default). The range is checked with the rest of the configuration.

use serde::Deserialize;

/// Smallest and largest sampling interval, seconds.
pub const INTERVAL_RANGE: (u64, u64) = (10, 600);

/// `[telemetry]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelemetryConfig {
    /// GPU sampling interval, seconds (10..=600).
    #[serde(default = "default_interval_secs")]
    pub interval_secs: u64,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        Self {
            interval_secs: default_interval_secs(),
        }
    }
}

fn default_interval_secs() -> u64 {
    60
}
