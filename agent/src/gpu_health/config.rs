//! `[gpu]`: the GPU health watch's settings. `health_recovery_secs` is how long an unhealthy
//! GPU must answer without a new critical error before it is trusted again (a driver-reported
//! reset trusts it at once).

use std::time::Duration;

use serde::Deserialize;

/// The accepted range of `gpu.health_recovery_secs`.
pub const RECOVERY_RANGE: (u64, u64) = (1, 86_400);

/// `[gpu]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuHealthConfig {
    /// Seconds an unhealthy GPU must answer before it is trusted again (1..=86400).
    #[serde(default = "default_recovery_secs")]
    pub health_recovery_secs: u64,
}

impl Default for GpuHealthConfig {
    fn default() -> Self {
        Self {
            health_recovery_secs: default_recovery_secs(),
        }
    }
}

impl GpuHealthConfig {
    /// The recovery period.
    pub fn recovery(&self) -> Duration {
        Duration::from_secs(self.health_recovery_secs)
    }
}

fn default_recovery_secs() -> u64 {
    super::book::DEFAULT_RECOVERY.as_secs()
}
