//! The seam between the uplink and the app manager: [`AppControl`] is what a session needs
//! (apply a snapshot, an upsert or a delete and return once it is persisted; the applied
//! generation; the current statuses and a stream of changes). The app manager implements it;
//! tests use an in-memory fake.

use async_trait::async_trait;
use odac_protocol::{AppSpec, AppStatus, DesiredState, ErrorCode};
use tokio::sync::broadcast;

/// Why a desired-state change was refused. The uplink answers with an `error` message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ApplyError {
    /// Code sent back (`invalid`, `conflict`, `internal`...).
    pub code: ErrorCode,
    /// What went wrong, naming the field or path.
    pub message: String,
}

impl ApplyError {
    /// An error with `code` and `message`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

/// What the uplink needs from the app manager.
#[async_trait]
pub trait AppControl: Send + Sync + 'static {
    /// Replaces the whole desired state; returns once it is persisted.
    async fn set_desired(&self, state: DesiredState) -> Result<(), ApplyError>;
    /// Adds or replaces one app, moving to `generation`; returns once persisted.
    async fn upsert(&self, generation: u64, app: AppSpec) -> Result<(), ApplyError>;
    /// Removes one app, moving to `generation`; returns once persisted.
    async fn delete(&self, generation: u64, name: String) -> Result<(), ApplyError>;
    /// The last applied generation, if any.
    fn generation(&self) -> Option<u64>;
    /// The current status of every app.
    fn statuses(&self) -> Vec<AppStatus>;
    /// Status changes from now on.
    fn subscribe(&self) -> broadcast::Receiver<std::sync::Arc<AppStatus>>;
    /// A telemetry reading of the GPUs (free VRAM for placement); ignored by default.
    fn offer_gpu_samples(&self, samples: &[odac_protocol::GpuSample]) {
        let _ = samples;
    }
}
