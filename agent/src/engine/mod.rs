//! The container engine seam. This is the only module of the agent that imports bollard:
//! everything else talks to the [`ContainerEngine`] trait (added with the app manager) and
//! reads [`EngineCapabilities`].

mod capabilities;
mod convert;
mod docker;
mod error;

pub use capabilities::EngineCapabilities;
pub use docker::{CONNECT_TIMEOUT, DockerEngine};
pub use error::EngineError;

/// Ask the engine at `docker_host` (`None`: the local default socket) for its capabilities.
/// Never hangs longer than a few seconds and never fails: an engine that cannot be reached
/// yields [`EngineCapabilities::unreachable`] with the reason.
pub async fn probe_capabilities(docker_host: Option<&str>) -> EngineCapabilities {
    match DockerEngine::lazy(docker_host) {
        Ok(engine) => engine.probe().await,
        Err(e) => EngineCapabilities::unreachable(e.to_string()),
    }
}
