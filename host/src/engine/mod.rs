//! The container engine seam. This is the only module of the workspace that imports bollard:
//! everything else talks to the [`ContainerEngine`] trait, its domain types
//! ([`ContainerSpec`], [`ContainerDetails`], ...) and [`EngineError`], and reads
//! [`EngineCapabilities`]. [`DockerEngine`] is the real implementation. Behind the
//! `test-support` feature (off by default), `FakeEngine` is an in-memory one for tests and
//! `test_image` builds a local busybox image without a registry.

mod api;
mod capabilities;
mod convert;
mod docker;
mod docker_build;
mod docker_events;
mod docker_exec;
mod docker_logs;
mod docker_ops;
mod docker_pull;
mod error;
pub mod error_counts;
mod events;
mod exec;
#[cfg(any(test, feature = "test-support"))]
pub mod fake;
mod log_stream;
mod pull;
mod run_options;
pub mod tail;
#[cfg(any(test, feature = "test-support"))]
pub mod test_image;
mod types;

pub use api::ContainerEngine;
pub use capabilities::EngineCapabilities;
pub use docker::{CONNECT_TIMEOUT, DockerEngine};
pub use error::EngineError;
pub use events::{CONTAINER_ACTIONS, EngineEvent, EngineEvents, EventFilter, EventKind};
pub use exec::{ExecChunk, ExecControl, ExecInput, ExecOutput, ExecProcess, ExecSpec};
#[cfg(any(test, feature = "test-support"))]
pub use fake::{EngineCall, FakeEngine, Op};
pub use log_stream::{LineSplitter, LogLines, LogStreamOptions};
pub use pull::{
    ImageInfo, LayerProgress, PullProgress, RegistryAuth, registry_host, split_reference,
};
pub use types::{
    Bind, BuildOutput, ContainerDetails, ContainerSpec, ContainerState, ContainerSummary,
    DeviceMapping, DeviceRequest, ImageSummary, PortMapping, label_matches,
};
pub use types::{ContainerHealth, HealthProbe, LogRotation};

/// Ask the engine at `docker_host` (`None`: the local default socket) for its capabilities.
/// Never hangs longer than a few seconds and never fails: an engine that cannot be reached
/// yields [`EngineCapabilities::unreachable`] with the reason.
pub async fn probe_capabilities(docker_host: Option<&str>) -> EngineCapabilities {
    match DockerEngine::lazy(docker_host) {
        Ok(engine) => engine.probe().await,
        Err(e) => EngineCapabilities::unreachable(e.to_string()),
    }
}
