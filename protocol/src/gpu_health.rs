//! `GpuHealth`: whether the agent trusts one GPU, from what the kernel said about it (NVIDIA
//! Xids, AMD ring timeouts and resets, Intel wedges). An `unhealthy` GPU is not given to new
//! containers; it is trusted again after it answered for the agent's recovery period or after
//! its driver reported a reset. Optional on `GpuInfo`, so older control planes still decode.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::validation::{ValidationError, check_opt_string, check_string};

/// Trusted or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum GpuHealthState {
    /// No critical error since the agent started, or recovered from one.
    Healthy,
    /// A critical error: not given to new containers until it recovers.
    Unhealthy,
}

/// One GPU's health.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct GpuHealth {
    /// Trusted or not.
    pub state: GpuHealthState,
    /// Since when (epoch milliseconds) the GPU has been in this state; absent when healthy
    /// since the agent started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since_ms: Option<u64>,
    /// The latest critical error, kept after a recovery.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<GpuError>,
}

/// A critical error the kernel reported for a GPU.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct GpuError {
    /// When the agent read it (epoch milliseconds).
    pub at_ms: u64,
    /// The NVIDIA Xid, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xid: Option<u32>,
    /// What happened, e.g. `xid 79: GPU has fallen off the bus`.
    pub summary: String,
    /// What to do about it (reset, reboot, RMA), where known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
    /// Critical errors of this GPU since the agent started.
    pub count: u32,
}

impl GpuHealth {
    /// Checks string lengths.
    pub fn validate(&self) -> Result<(), ValidationError> {
        if let Some(e) = &self.last_error {
            check_string("health.last_error.summary", &e.summary)?;
            check_opt_string("health.last_error.fix", e.fix.as_ref())?;
        }
        Ok(())
    }

    /// True when the GPU may be given to new containers.
    pub fn is_healthy(&self) -> bool {
        self.state == GpuHealthState::Healthy
    }
}
