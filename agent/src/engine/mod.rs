//! The container engine seam. This is the only module of the agent that imports bollard:
//! everything else talks to the [`ContainerEngine`] trait (added with the app manager) and
//! reads [`EngineCapabilities`].

mod capabilities;

pub use capabilities::EngineCapabilities;
