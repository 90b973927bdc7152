//! Where live logs come from and how far they may go: [`LogSource`] (the engine and the
//! instance whose containers are the apps') and [`LogLimits`] (streams per session, rate, queue
//! and chunk bounds), shared by the session's streams ([`super::logs`]) and each stream's task
//! ([`super::log_pump`]).

use std::sync::Arc;
use std::time::Duration;

use odac_host::engine::ContainerEngine;

/// Bounds of live log streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogLimits {
    /// Streams open at once per session; one more ends at once with `busy`.
    pub max_streams: usize,
    /// How long a stream lasts when its request names no timeout.
    pub default_timeout: Duration,
    /// Lines per second per stream (also the burst).
    pub lines_per_sec: u32,
    /// Chunks waiting to be sent, per session.
    pub queue: usize,
    /// Most lines in one chunk.
    pub chunk_lines: usize,
    /// Most bytes of text in one chunk.
    pub chunk_bytes: usize,
    /// How long a line may wait for its chunk to fill.
    pub linger: Duration,
}

impl Default for LogLimits {
    fn default() -> Self {
        Self {
            max_streams: 8,
            default_timeout: Duration::from_secs(600),
            lines_per_sec: 2000,
            queue: 8,
            chunk_lines: 500,
            chunk_bytes: 64 * 1024,
            linger: Duration::from_millis(100),
        }
    }
}

/// Where the logs come from: the engine and the instance whose containers are the apps'.
pub struct LogSource {
    pub(super) engine: Arc<dyn ContainerEngine>,
    pub(super) instance: String,
    pub(super) limits: LogLimits,
}

impl LogSource {
    /// Logs of `instance`'s app containers on `engine`.
    pub fn new(engine: Arc<dyn ContainerEngine>, instance: impl Into<String>) -> Self {
        Self {
            engine,
            instance: instance.into(),
            limits: LogLimits::default(),
        }
    }

    /// Other bounds (tests).
    #[must_use]
    pub fn with_limits(mut self, limits: LogLimits) -> Self {
        self.limits = limits;
        self
    }
}
