//! Updates that cannot take an app down: the spec's update policy ([`UpdatePolicy`]: how long
//! a new version must stay up, by when it must be healthy, whether the agent goes back to the
//! previous version when it does not) and the status's rollout part ([`RolloutReport`]: a
//! rollout under way with its deadline, or one rolled back with the failing generation, the
//! cause and when). A status's `running_generation` says which generation's spec the
//! container runs when it is not the desired one.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::runtime::{CrashInfo, HealthReport, MAX_HEALTH_SECS};
use crate::validation::{ValidationError, check_opt_string, check_range};

/// How long a new version must keep running before it counts as good, by default.
pub const DEFAULT_MIN_HEALTHY_SECS: u32 = 10;

/// How long a new version with a health check has to report healthy, by default.
pub const DEFAULT_HEALTHY_DEADLINE_SECS: u32 = 120;

/// How long an update waits for the app's `/run/odac/update.lock` to go, by default.
pub const DEFAULT_MAX_LOCK_SECS: u32 = 3600;

/// How an app's container is replaced when its spec changes (`update` in the spec).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct UpdatePolicy {
    /// Seconds the new container must keep running (and, with a health check, be healthy)
    /// before the change counts as done (0..=86400, default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_healthy_secs: Option<u32>,
    /// Seconds after the new container is created within which it must be healthy when it
    /// has a health check (1..=86400, default 120).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub healthy_deadline_secs: Option<u32>,
    /// Go back to the previous version when the new one exits, crash-loops, is OOM-killed or
    /// is not healthy by the deadline (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_revert: Option<bool>,
    /// Seconds an update waits while the app holds `/run/odac/update.lock` (a recording, a
    /// long job), counted from the lock file's modification time; an older lock is ignored
    /// with a warning (0..=86400, default 3600).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_lock_secs: Option<u32>,
    /// How the old container makes way for the new one (default `stop_first`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order: Option<UpdateOrder>,
}

/// How the old container makes way for the new one (`update.order`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum UpdateOrder {
    /// The old container is stopped, then the new one started: always safe with host ports
    /// and GPUs, at the cost of a gap.
    #[default]
    StopFirst,
    /// Hand-over: the new container starts beside the old one under a temporary name; the old
    /// one is stopped only once the new one has proven itself. Refused for an app that binds
    /// host ports, or asks for more GPUs than the host can give twice.
    StartFirst,
}

impl UpdateOrder {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            UpdateOrder::StopFirst => "stop_first",
            UpdateOrder::StartFirst => "start_first",
        }
    }
}

impl fmt::Display for UpdateOrder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl UpdatePolicy {
    /// `min_healthy_secs` or its default.
    pub fn min_healthy_secs(&self) -> u32 {
        self.min_healthy_secs.unwrap_or(DEFAULT_MIN_HEALTHY_SECS)
    }

    /// `healthy_deadline_secs` or its default.
    pub fn healthy_deadline_secs(&self) -> u32 {
        self.healthy_deadline_secs
            .unwrap_or(DEFAULT_HEALTHY_DEADLINE_SECS)
    }

    /// `auto_revert` or its default (true).
    pub fn auto_revert(&self) -> bool {
        self.auto_revert.unwrap_or(true)
    }

    /// `max_lock_secs` or its default.
    pub fn max_lock_secs(&self) -> u32 {
        self.max_lock_secs.unwrap_or(DEFAULT_MAX_LOCK_SECS)
    }

    /// `order` or its default (`stop_first`).
    pub fn order(&self) -> UpdateOrder {
        self.order.unwrap_or_default()
    }

    /// Checks the bounds; the error names the field.
    pub fn validate(&self) -> Result<(), ValidationError> {
        check_range("max_lock_secs", self.max_lock_secs, 0..=MAX_HEALTH_SECS)?;
        check_range(
            "min_healthy_secs",
            self.min_healthy_secs,
            0..=MAX_HEALTH_SECS,
        )?;
        check_range(
            "healthy_deadline_secs",
            self.healthy_deadline_secs,
            1..=MAX_HEALTH_SECS,
        )
    }
}

/// Where a rollout stands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RolloutState {
    /// The new version runs and has not proven itself yet (see `deadline_at_ms`).
    #[default]
    RollingOut,
    /// The new version failed; the previous one runs again (`running_generation`).
    RolledBack,
    /// The new version failed and `update.auto_revert` is false: it is left as it is.
    Failed,
    /// The app holds its update lock (`/run/odac/update.lock`): the previous version runs
    /// until the lock goes or `deadline_at_ms` (`update.max_lock_secs` after the lock's
    /// modification time) passes.
    UpdateWaitingLock,
}

impl RolloutState {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            RolloutState::RollingOut => "rolling_out",
            RolloutState::RolledBack => "rolled_back",
            RolloutState::Failed => "failed",
            RolloutState::UpdateWaitingLock => "update_waiting_lock",
        }
    }
}

impl fmt::Display for RolloutState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The rollout part of an app's status: present while a changed spec is rolled out, and after
/// one was rolled back (until a newer spec or restart token arrives).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct RolloutReport {
    /// Where it stands.
    pub state: RolloutState,
    /// The desired-state generation whose spec is being rolled out, or failed.
    pub generation: u64,
    /// `rolling_out`: when the new version will have proven itself (running
    /// `min_healthy_secs`) or, with a health check, must be healthy; Unix milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_at_ms: Option<u64>,
    /// `rolled_back`/`failed`: what went wrong, in one line (e.g. `exited with code 3`,
    /// `not healthy 120 s after it started`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// `rolled_back`/`failed`: how the new version's last run ended (exit code, OOM kill,
    /// output tail), when it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<CrashInfo>,
    /// `rolled_back`/`failed`: the new version's health verdict and failing check output,
    /// when it had a health check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<HealthReport>,
    /// `rolled_back`/`failed`: when the failure was decided, Unix milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_ms: Option<u64>,
}

impl RolloutReport {
    /// Checks string lengths and the parts' bounds.
    pub fn validate(&self) -> Result<(), ValidationError> {
        check_opt_string("error", self.error.as_ref())?;
        if let Some(c) = &self.cause {
            c.validate().map_err(|e| e.under("cause"))?;
        }
        if let Some(h) = &self.health {
            h.validate().map_err(|e| e.under("health"))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_bounds() {
        let p = UpdatePolicy::default();
        assert_eq!(
            (
                p.min_healthy_secs(),
                p.healthy_deadline_secs(),
                p.auto_revert()
            ),
            (10, 120, true)
        );
        let bad = UpdatePolicy {
            healthy_deadline_secs: Some(0),
            ..UpdatePolicy::default()
        };
        assert!(
            bad.validate()
                .map_err(|e| e.to_string())
                .unwrap_err()
                .starts_with("healthy_deadline_secs: ")
        );
        assert_eq!(p.order(), UpdateOrder::StopFirst);
        let wire = serde_json::to_string(&RolloutState::RolledBack).unwrap_or_default();
        assert_eq!(wire, "\"rolled_back\"");
    }
}
