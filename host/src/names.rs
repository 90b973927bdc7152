//! The names the agent gives what it makes on the engine, shared with the simulator (whose
//! demo fleet finds the agent's containers by them): the labels that mark the agent's own
//! containers and carry what reconcile needs after a restart (the code that sets and reads
//! them is the agent's `appmgr::labels`), and the engine names of an app's container
//! (`<instance>_<app>`) and named volumes (`<instance>_<app>_<volume>`).
//!
//! Names are injective: app names are DNS labels and instance names contain no `_` either, so
//! the first `_` ends the instance and the second the app, whatever the volume name holds.

/// This agent's instance (value: the configured instance name).
pub const INSTANCE: &str = "odac.instance";
/// The agent that created it (value: its agent id).
pub const OWNER: &str = "odac.owner";
/// App name.
pub const APP: &str = "odac.app";
/// Hash of the spec without its GPU intent and restart token.
pub const SPEC_HASH: &str = "odac.spec-hash";
/// Hash of the GPU intent (`none` without one).
pub const GPU_HASH: &str = "odac.gpu-hash";
/// Hash of the spec's host-access fields (`shm_size`, `caps`, `sysctls`, `devices`).
pub const ACCESS_HASH: &str = "odac.access-hash";
/// Restart token (empty without one).
pub const RESTART_TOKEN: &str = "odac.restart-token";
/// GPUs held, comma-separated GPU ids (PCI addresses); absent on the CPU.
pub const GPU_DEVICES: &str = "odac.gpu.devices";
/// Vendor attached.
pub const GPU_VENDOR: &str = "odac.gpu.vendor";
/// The fallback taken, as JSON.
pub const GPU_FALLBACK: &str = "odac.gpu.fallback";

/// Commit an image was built from (on the image and on its containers).
pub const GIT_COMMIT: &str = "odac.git.commit";
/// Repository an image was built from (without credentials).
pub const GIT_URL: &str = "odac.git.url";
/// Dockerfile path an image was built with.
pub const GIT_DOCKERFILE: &str = "odac.git.dockerfile";

/// What separates instance, app and volume in engine names; no instance or app name has it.
pub const SEPARATOR: char = '_';

/// Container name of an app.
pub fn container_name(instance: &str, app: &str) -> String {
    format!("{instance}{SEPARATOR}{app}")
}

/// Engine name of an app's named volume.
pub fn volume_name(instance: &str, app: &str, source: &str) -> String {
    format!("{instance}{SEPARATOR}{app}{SEPARATOR}{source}")
}
