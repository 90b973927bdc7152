//! How a container runs and what the engine says about its health: the health probe and the
//! log rotation a [`ContainerSpec`](super::ContainerSpec) asks for, and the health state
//! [`ContainerDetails`](super::ContainerDetails) reads back. Domain types only; `convert.rs`
//! maps them to and from bollard's.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// A health check run by the engine inside the container.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HealthProbe {
    /// Command and arguments, exec form.
    pub command: Vec<String>,
    /// Time between checks; `None`: the engine's default (30 s).
    pub interval: Option<Duration>,
    /// Time a check may take; `None`: the engine's default (30 s).
    pub timeout: Option<Duration>,
    /// Failures in a row that make the container unhealthy; `None`: the engine's default (3).
    pub retries: Option<u32>,
    /// Time after start during which failures do not count; `None`: none.
    pub start_period: Option<Duration>,
}

/// The json-file log driver with a size limit and a file count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogRotation {
    /// Largest log file, in bytes.
    pub max_size_bytes: u64,
    /// Log files kept.
    pub max_files: u32,
}

/// A container's health as the engine reports it, when it has a health check.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerHealth {
    /// `starting`, `healthy` or `unhealthy`.
    pub status: String,
    /// Output of the most recent check that failed, if the most recent check failed.
    pub last_failure: Option<String>,
}
