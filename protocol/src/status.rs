//! `AppStatus`: what the agent reports about one app — its state, the GPU requested (as sent,
//! never rewritten), the GPU attached (read back from the engine), the fallback taken (tier,
//! reason, detail), restart bookkeeping, the last error, and why the image could not be had
//! (a failed pull or build: its own part, not a GPU fallback).

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::gpu::{GpuRequest, deserialize_opt_gpu};
use crate::limits::MAX_LIST;
use crate::reason::Reason;
use crate::rollout::RolloutReport;
use crate::runtime::{CrashInfo, HealthReport};
use crate::validation::{ValidationError, check_dns_label, check_opt_string, check_string_list};
use crate::vendor::{Mechanism, Vendor};

/// The observed status of one app.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct AppStatus {
    /// App name.
    pub name: String,
    /// Desired-state generation this status reflects.
    pub generation: u64,
    /// Lifecycle state.
    pub state: AppState,
    /// Container id, once created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_id: Option<String>,
    /// GPU request, attachment and fallback.
    #[serde(default)]
    pub gpu: GpuStatus,
    /// True when the running container does not match the spec and needs a restart
    /// (e.g. a GPU became available for an app that fell back to the CPU).
    #[serde(default)]
    pub restart_required: bool,
    /// Restarts observed since the container was created.
    #[serde(default)]
    pub restart_count: u32,
    /// Exit code of the last exit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_exit_code: Option<i64>,
    /// Last error, in the engine's or builder's words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Image the container runs (for git sources, the built tag).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// Commit built, for git sources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// Why the last run ended, while the app is not running (see [`CrashInfo`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crash: Option<CrashInfo>,
    /// The container's health check verdict, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<HealthReport>,
    /// Id (`sha256:…`) of the image the container runs, read back from the engine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_id: Option<String>,
    /// Repo digest (`repo@sha256:…`) of that image, when it came from a registry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repo_digest: Option<String>,
    /// When the agent tries again to get the app running after a failure that is not an exit
    /// (a pull, a build, a create the engine refused), Unix milliseconds; absent when it does
    /// not (a held failure waits for a change of the spec). An exit's retry is in `crash`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_retry_at_ms: Option<u64>,
    /// The desired-state generation whose spec of this app the container runs, when it is not
    /// the app's spec at `generation`: after a rollback, the generation of the version that
    /// runs again. Absent when the container runs the desired spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running_generation: Option<u64>,
    /// A changed spec being rolled out, or rolled back (see [`RolloutReport`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<RolloutReport>,
    /// Why the app's image could not be had (a pull or a build failed), while that failure
    /// stands; never in `gpu.fallback`, which is the GPU decision only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_failure: Option<ImageFailure>,
}

/// The app's image could not be had: its pull or its build failed.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct ImageFailure {
    /// `image_pull_failed` or `build_failed`.
    pub reason: Reason,
    /// The registry's or the builder's words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// Lifecycle state of an app.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AppState {
    /// Accepted, not yet acted on.
    #[default]
    Pending,
    /// Pulling, building or creating the container.
    Creating,
    /// Running.
    Running,
    /// Being restarted.
    Restarting,
    /// Restarting too often; the agent backs off.
    CrashLoop,
    /// Exited and not restarted.
    Stopped,
    /// Cannot be started; see `last_error`, `image_failure` and `gpu.fallback`.
    Failed,
    /// The app left the desired state and its container is gone: the last status of that
    /// app, whose `generation` is the one that removed it.
    Removed,
    /// Exited 0 under restart policy `on_failure` or `never`: done, not a crash.
    Exited,
    /// Pulling the app's image from its registry.
    Pulling,
}

impl AppState {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            AppState::Pending => "pending",
            AppState::Creating => "creating",
            AppState::Running => "running",
            AppState::Restarting => "restarting",
            AppState::CrashLoop => "crash_loop",
            AppState::Stopped => "stopped",
            AppState::Failed => "failed",
            AppState::Removed => "removed",
            AppState::Exited => "exited",
            AppState::Pulling => "pulling",
        }
    }
}

impl fmt::Display for AppState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// GPU part of an app's status.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct GpuStatus {
    /// The request exactly as it was sent in the spec.
    #[serde(
        default,
        deserialize_with = "deserialize_opt_gpu",
        skip_serializing_if = "Option::is_none"
    )]
    pub requested: Option<GpuRequest>,
    /// What the container actually got, read back from the engine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attached: Option<Attached>,
    /// The fallback taken, when the GPU could not be attached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<Fallback>,
}

/// GPUs attached to a container.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct Attached {
    /// Vendor.
    pub vendor: Vendor,
    /// How they were passed.
    pub mechanism: Mechanism,
    /// Concrete devices: CDI names, NVIDIA UUIDs or indexes, or device node paths.
    #[serde(default)]
    pub devices: Vec<String>,
    /// The driver capabilities the container gets (`compute`, `utility`, `video`, …), read
    /// back from the engine: for NVIDIA the set given to the toolkit (the request's, else the
    /// image's `NVIDIA_DRIVER_CAPABILITIES`, else `compute,utility`); for AMD and Intel
    /// device nodes `compute,video` (the render node with the `video`/`render` groups serves
    /// both). Absent in statuses of older agents.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capabilities: Vec<String>,
}

/// A fallback: the GPU was not attached, and why.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct Fallback {
    /// Where the decision was taken.
    pub tier: FallbackTier,
    /// Why.
    pub reason: Reason,
    /// Evidence, e.g. the engine's refusal text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// Where a fallback was decided.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FallbackTier {
    /// Before any container was created, from the inventory.
    #[default]
    Preflight,
    /// After the engine refused the device at create or start.
    Engine,
}

impl AppStatus {
    /// Checks the name and string lengths. The requested GPU is an echo of the spec and is
    /// not re-validated here.
    pub fn validate(&self) -> Result<(), ValidationError> {
        check_dns_label("name", &self.name)?;
        check_opt_string("container_id", self.container_id.as_ref())?;
        check_opt_string("last_error", self.last_error.as_ref())?;
        check_opt_string("image", self.image.as_ref())?;
        check_opt_string("commit", self.commit.as_ref())?;
        check_opt_string("image_id", self.image_id.as_ref())?;
        check_opt_string("repo_digest", self.repo_digest.as_ref())?;
        if let Some(a) = &self.gpu.attached {
            check_string_list("gpu.attached.devices", &a.devices, MAX_LIST)?;
        }
        if let Some(f) = &self.gpu.fallback {
            check_opt_string("gpu.fallback.detail", f.detail.as_ref())?;
        }
        if let Some(f) = &self.image_failure {
            check_opt_string("image_failure.detail", f.detail.as_ref())?;
        }
        if let Some(c) = &self.crash {
            c.validate().map_err(|e| e.under("crash"))?;
        }
        if let Some(h) = &self.health {
            h.validate().map_err(|e| e.under("health"))?;
        }
        if let Some(r) = &self.rollout {
            r.validate().map_err(|e| e.under("rollout"))?;
        }
        Ok(())
    }
}
